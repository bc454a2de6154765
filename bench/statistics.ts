import type { PhaseResult } from './load-protocol.js';
import type { Scenario, ScenarioId } from './scenarios.js';

/** One scenario measured in one round. */
export interface ScenarioRun {
  scenario: ScenarioId;
  round: number;
  /** Every phase: prepare (replay scenarios, first round), warm-up, measure. */
  phases: PhaseResult[];
  measured: PhaseResult;
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
}

/** What encryption at rest costs: an encrypted scenario against its plain twin, both without a replay cache. */
export interface EncryptionRatio {
  /** `first` or `replay`. */
  path: 'first' | 'replay';
  encrypted: ScenarioId;
  plain: ScenarioId;
  /** Encrypted ÷ plain median req/s: below 1 means slower. */
  throughput: number;
  /** Encrypted ÷ plain median p99: above 1 means slower. */
  p99: number;
  throughputByRound: number[];
}

const ENCRYPTION_PAIRS: ReadonlyArray<Pick<EncryptionRatio, 'path' | 'encrypted' | 'plain'>> = [
  { path: 'first', encrypted: 'encrypted-first', plain: 'uncached-first' },
  { path: 'replay', encrypted: 'encrypted-replay', plain: 'uncached-replay' },
];

/** Encrypted ÷ plain for first executions and replays, from medians and round by round, where both scenarios ran. */
export function encryptionRatios(summaries: readonly ScenarioSummary[], runs: readonly ScenarioRun[]): EncryptionRatio[] {
  return ENCRYPTION_PAIRS.flatMap((pair) => {
    const encrypted = summaries.find((summary) => summary.id === pair.encrypted);
    const plain = summaries.find((summary) => summary.id === pair.plain);
    if (!encrypted || !plain) return [];
    const plainByRound = new Map(runs.filter((run) => run.scenario === pair.plain).map((run) => [run.round, run.measured]));
    return [
      {
        ...pair,
        throughput: encrypted.medianRequestsPerSecond / plain.medianRequestsPerSecond,
        p99: encrypted.medianP99Ms / plain.medianP99Ms,
        throughputByRound: runs
          .filter((run) => run.scenario === pair.encrypted && plainByRound.has(run.round))
          .map((run) => run.measured.requestsPerSecond / plainByRound.get(run.round)!.requestsPerSecond),
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
  const first = rps('first');
  const peerFirst = rps('peer-first');
  return {
    firstExecutionThroughput: of('first')?.throughput,
    firstExecutionP99: of('first')?.p99,
    replayThroughput: of('replay')?.throughput,
    peerFirstExecutionThroughput: of('peer-first')?.throughput,
    peerFirstExecutionP99: of('peer-first')?.p99,
    peerReplayThroughput: of('peer-replay')?.throughput,
    firstExecutionVersusPeer: first !== undefined && peerFirst !== undefined ? first / peerFirst : undefined,
  };
}

function sum(values: readonly number[]): number {
  return values.reduce((total, value) => total + value, 0);
}
