import type { CpuCost } from './cpu-cost.js';
import type { PhaseResult } from './load-protocol.js';
import { type Scenario, type ScenarioId, TWINS, type Twins } from './scenarios.js';

/** One scenario measured in one round. */
export interface ScenarioRun {
  scenario: ScenarioId;
  round: number;
  /** Every phase: prepare (replay scenarios, first round), warm-up, measure. */
  phases: PhaseResult[];
  measured: PhaseResult;
  /** CPU time of the app, PostgreSQL and Redis during the measured phase. */
  cpu: CpuCost;
  problems: string[];
}

/** Medians over rounds of one group of runs. */
export interface RunSummary {
  rounds: number;
  medianRequestsPerSecond: number;
  medianP50Ms: number;
  medianP99Ms: number;
  /** Measured phases only, summed over rounds. */
  statusCounts: Record<string, number>;
  non2xx: number;
  problems: string[];
}

/** One scenario over all rounds. */
export interface ScenarioSummary extends RunSummary {
  id: ScenarioId;
  label: string;
  replayed2xx: number;
  fresh2xx: number;
  burst?: { completeGroups: number; overlappingGroups: number };
  /** Medians over rounds of CPU µs per 2xx answer; unset where not measured. */
  medianCpuMicrosPerRequest: { app?: number; postgres?: number; redis?: number };
}

/** A scenario against the bare transaction: ratios of medians, and the same ratio round by round. */
export interface RatioToBare {
  id: ScenarioId;
  throughput: number;
  p99: number;
  throughputByRound: number[];
}

/** The ratios the bench exists for, where both scenarios ran. */
export interface HeadlineRatios {
  firstExecutionThroughput?: number;
  firstExecutionP99?: number;
  replayThroughput?: number;
  peerFirstExecutionThroughput?: number;
  peerFirstExecutionP99?: number;
  peerReplayThroughput?: number;
  /** This module's first execution against the peer's: above 1 means faster. */
  firstExecutionVersusPeer?: number;
  /** This module's replay (from its cache) against the peer's (from Redis). */
  replayVersusPeer?: number;
  /** This module's replay with the cache off (from PostgreSQL) against the peer's. */
  uncachedReplayVersusPeer?: number;
}

/** A scenario against its twin (see TWINS in scenarios.ts): what the one difference between them costs. */
export interface TwinRatio extends Twins {
  /** Subject ÷ base median req/s: below 1 means slower. */
  throughput: number;
  /** Subject ÷ base median p99: above 1 means slower. */
  p99: number;
  throughputByRound: number[];
  /** Subject − base median CPU µs per request, where measured: what the difference costs each process. */
  appCpuMicros?: number;
  postgresCpuMicros?: number;
}

/** Every twin comparison whose two scenarios both ran, from medians and round by round. */
export function twinRatios(summaries: readonly ScenarioSummary[], runs: readonly ScenarioRun[]): TwinRatio[] {
  return TWINS.flatMap((twins) => {
    const subject = summaries.find((summary) => summary.id === twins.subject);
    const base = summaries.find((summary) => summary.id === twins.base);
    if (!subject || !base) return [];
    const baseByRound = new Map(runs.filter((run) => run.scenario === twins.base).map((run) => [run.round, run.measured]));
    const difference = (process: 'app' | 'postgres') => {
      const [a, b] = [subject.medianCpuMicrosPerRequest[process], base.medianCpuMicrosPerRequest[process]];
      return a === undefined || b === undefined ? undefined : Math.round((a - b) * 10) / 10;
    };
    return [
      {
        ...twins,
        throughput: subject.medianRequestsPerSecond / base.medianRequestsPerSecond,
        p99: subject.medianP99Ms / base.medianP99Ms,
        throughputByRound: runs
          .filter((run) => run.scenario === twins.subject && baseByRound.has(run.round))
          .map((run) => run.measured.requestsPerSecond / baseByRound.get(run.round)!.requestsPerSecond),
        appCpuMicros: difference('app'),
        postgresCpuMicros: difference('postgres'),
      },
    ];
  });
}

/** The median; the mean of the middle two for an even count. */
export function median(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

/** Medians and totals of each scenario that ran, in catalogue order. */
export function summarise(scenarios: readonly Scenario[], runs: readonly ScenarioRun[]): ScenarioSummary[] {
  return scenarios.flatMap((scenario) => {
    const own = runs.filter((run) => run.scenario === scenario.id);
    if (own.length === 0) return [];
    const measured = own.map((run) => run.measured);
    const statusCounts: Record<string, number> = {};
    for (const phase of measured) for (const [status, count] of Object.entries(phase.statusCounts)) statusCounts[status] = (statusCounts[status] ?? 0) + count;
    const bursts = measured.flatMap((phase) => (phase.burst ? [phase.burst] : []));
    return [
      {
        id: scenario.id,
        label: scenario.label,
        rounds: own.length,
        medianRequestsPerSecond: median(measured.map((phase) => phase.requestsPerSecond)),
        medianP50Ms: median(measured.map((phase) => phase.latencyMs.p50)),
        medianP99Ms: median(measured.map((phase) => phase.latencyMs.p99)),
        statusCounts,
        non2xx: sum(measured.map((phase) => phase.non2xx)),
        replayed2xx: sum(measured.map((phase) => phase.replayed2xx)),
        fresh2xx: sum(measured.map((phase) => phase.fresh2xx)),
        burst: bursts.length
          ? { completeGroups: sum(bursts.map((b) => b.completeGroups)), overlappingGroups: sum(bursts.map((b) => b.overlappingGroups)) }
          : undefined,
        problems: own.flatMap((run) => run.problems.map((problem) => `round ${run.round} ${problem}`)),
        medianCpuMicrosPerRequest: {
          app: medianOf(own.map((run) => run.cpu.appMicrosPerRequest)),
          postgres: medianOf(own.map((run) => run.cpu.postgresMicrosPerRequest)),
          redis: medianOf(own.map((run) => run.cpu.redisMicrosPerRequest)),
        },
      },
    ];
  });
}

/** Every scenario against the bare transaction, from medians and round by round. */
export function ratiosToBare(summaries: readonly ScenarioSummary[], runs: readonly ScenarioRun[]): RatioToBare[] {
  const bare = summaries.find((summary) => summary.id === 'bare');
  if (!bare) return [];
  const bareByRound = new Map(runs.filter((run) => run.scenario === 'bare').map((run) => [run.round, run.measured]));
  return summaries.map((summary) => ({
    id: summary.id,
    throughput: summary.medianRequestsPerSecond / bare.medianRequestsPerSecond,
    p99: summary.medianP99Ms / bare.medianP99Ms,
    throughputByRound: runs
      .filter((run) => run.scenario === summary.id && bareByRound.has(run.round))
      .map((run) => run.measured.requestsPerSecond / bareByRound.get(run.round)!.requestsPerSecond),
  }));
}

/** The named ratios, from the ratios to the bare transaction. */
export function headlineRatios(ratios: readonly RatioToBare[], summaries: readonly ScenarioSummary[]): HeadlineRatios {
  const of = (id: ScenarioId) => ratios.find((ratio) => ratio.id === id);
  const rps = (id: ScenarioId) => summaries.find((summary) => summary.id === id)?.medianRequestsPerSecond;
  const versus = (ours: number | undefined, peer: number | undefined) => (ours !== undefined && peer !== undefined ? ours / peer : undefined);
  return {
    firstExecutionThroughput: of('first')?.throughput,
    firstExecutionP99: of('first')?.p99,
    replayThroughput: of('replay')?.throughput,
    peerFirstExecutionThroughput: of('peer-first')?.throughput,
    peerFirstExecutionP99: of('peer-first')?.p99,
    peerReplayThroughput: of('peer-replay')?.throughput,
    firstExecutionVersusPeer: versus(rps('first'), rps('peer-first')),
    replayVersusPeer: versus(rps('replay'), rps('peer-replay')),
    uncachedReplayVersusPeer: versus(rps('uncached-replay'), rps('peer-replay')),
  };
}

function sum(values: readonly number[]): number {
  return values.reduce((total, value) => total + value, 0);
}

/** The median of the values that were measured, or undefined when none was. */
function medianOf(values: ReadonlyArray<number | undefined>): number | undefined {
  const measured = values.filter((value): value is number => value !== undefined && Number.isFinite(value));
  return measured.length ? median(measured) : undefined;
}
