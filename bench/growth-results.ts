import type { BenchAppOptions } from './bench-app.module.js';
import type { PhaseResult } from './load-protocol.js';
import type { Scenario } from './scenarios.js';
import { median, type RunSummary } from './statistics.js';

export type { RunSummary };

/** The growth scenario ids. */
export type GrowthScenarioId = 'claim-first-first' | 'replay' | 'replay-uncached';

/**
 * The apps of a size's window, by their module options (the reaper is off in
 * both): the module's defaults, and one without the replay cache. The cache
 * is the app's, not a route's, so that every scenario runs on the one route
 * whose operation the seeded records share.
 */
export const GROWTH_APPS = {
  main: {},
  uncached: { replayCacheSize: 0 },
} satisfies Record<string, BenchAppOptions['idempotency']>;

/** One kind of load on the `@Idempotent()` bench route, on one of the window's apps. */
export interface GrowthScenario extends Pick<Scenario, 'label' | 'path' | 'keys' | 'statuses' | 'replays'> {
  id: GrowthScenarioId;
  app: keyof typeof GROWTH_APPS;
}

/** The `@Idempotent()` route every growth scenario and the reaping part load; the seeded records share its operation. */
export const GROWTH_ROUTE = '/bench/orders/idempotent';

/** A random UUID key per request: first executions that land all over the primary key, as clients' keys do. */
export const FIRST_EXECUTIONS = { path: GROWTH_ROUTE, keys: 'random', statuses: [201], replays: 'none' } as const;
const REPLAYS = { path: GROWTH_ROUTE, keys: 'cycle', statuses: [201], replays: 'all' } as const;

/** In the order they run in odd rounds' windows; even rounds reverse it. */
export const GROWTH_SCENARIOS: readonly GrowthScenario[] = [
  { id: 'claim-first-first', label: 'first execution', app: 'main', ...FIRST_EXECUTIONS },
  { id: 'replay', label: 'replay, cache on', app: 'main', ...REPLAYS },
  { id: 'replay-uncached', label: 'replay, cache off', app: 'uncached', ...REPLAYS },
];

/** One scenario measured once: at one table size in one round, or in one reaping variant in one round. */
export interface MeasuredRun {
  round: number;
  /** Every phase: prepare (replay scenarios, first round), warm-up, measure. */
  phases: PhaseResult[];
  measured: PhaseResult;
  problems: string[];
}

/** A growth scenario at one table size. */
export interface SizeRun extends MeasuredRun {
  size: number;
  scenario: GrowthScenarioId;
}

/** First executions without reaping (`idle`) or while the reaper deletes the backlog. */
export interface ReapingRun extends MeasuredRun {
  variant: 'idle' | 'reaping';
  /** Expired records left just before and just after the measured phase. */
  backlogBefore: number;
  backlogAfter: number;
  /** Records topped up before the window so that it started with the full backlog. */
  toppedUp: number;
  /** Seconds between the two backlog counts. */
  seconds: number;
  /** Deleted records per second between the two counts. */
  reapedPerSecond: number;
}

/** Medians and totals over the measured phases of `runs`. */
export function summariseRuns(runs: readonly MeasuredRun[]): RunSummary {
  const measured = runs.map((run) => run.measured);
  const statusCounts: Record<string, number> = {};
  for (const phase of measured) for (const [status, count] of Object.entries(phase.statusCounts)) statusCounts[status] = (statusCounts[status] ?? 0) + count;
  return {
    rounds: runs.length,
    medianRequestsPerSecond: median(measured.map((phase) => phase.requestsPerSecond)),
    medianP50Ms: median(measured.map((phase) => phase.latencyMs.p50)),
    medianP99Ms: median(measured.map((phase) => phase.latencyMs.p99)),
    statusCounts,
    non2xx: measured.reduce((sum, phase) => sum + phase.non2xx, 0),
    problems: runs.flatMap((run) => run.problems.map((problem) => `round ${run.round} ${problem}`)),
  };
}

/** A scenario at one size, against the same scenario at the smallest size: ratios of medians, and round by round. */
export interface SizeSummary extends RunSummary {
  size: number;
  scenario: GrowthScenarioId;
  throughputRatio: number;
  p99Ratio: number;
  throughputRatioByRound: number[];
}

/** Every scenario at every size, with its ratios against the smallest size. */
export function summariseSizes(sizes: readonly number[], runs: readonly SizeRun[]): SizeSummary[] {
  const baseSize = sizes[0];
  return GROWTH_SCENARIOS.flatMap((scenario) => {
    const own = runs.filter((run) => run.scenario === scenario.id);
    const base = summariseRuns(own.filter((run) => run.size === baseSize));
    const baseByRound = new Map(own.filter((run) => run.size === baseSize).map((run) => [run.round, run.measured.requestsPerSecond]));
    return sizes.flatMap((size) => {
      const atSize = own.filter((run) => run.size === size);
      if (atSize.length === 0) return [];
      const summary = summariseRuns(atSize);
      return [
        {
          ...summary,
          size,
          scenario: scenario.id,
          throughputRatio: summary.medianRequestsPerSecond / base.medianRequestsPerSecond,
          p99Ratio: summary.medianP99Ms / base.medianP99Ms,
          throughputRatioByRound: atSize.filter((run) => baseByRound.has(run.round)).map((run) => run.measured.requestsPerSecond / baseByRound.get(run.round)!),
        },
      ];
    });
  });
}

/** First executions with the reaper deleting against without: the target is a p99 ratio below 1.2. */
export interface ReapingSummary {
  idle: RunSummary;
  reaping: RunSummary;
  p99Ratio: number;
  throughputRatio: number;
  /** The bound on `p99Ratio`. */
  p99Target: number;
  /** Median over reaping rounds of deleted records per second while the claims ran, and each round's. */
  medianReapedPerSecond: number;
  reapedPerSecondByRound: number[];
  /** Rounds in which the backlog ran out: the reaper then idled for part of the window. */
  exhaustedRounds: number[];
}

/** The reaping part's medians and ratios. */
export function summariseReaping(runs: readonly ReapingRun[]): ReapingSummary {
  const idleRuns = runs.filter((run) => run.variant === 'idle');
  const reapingRuns = runs.filter((run) => run.variant === 'reaping');
  const idle = summariseRuns(idleRuns);
  const reaping = summariseRuns(reapingRuns);
  const rates = reapingRuns.map((run) => run.reapedPerSecond);
  return {
    idle,
    reaping,
    p99Ratio: reaping.medianP99Ms / idle.medianP99Ms,
    throughputRatio: reaping.medianRequestsPerSecond / idle.medianRequestsPerSecond,
    p99Target: 1.2,
    medianReapedPerSecond: median(rates),
    reapedPerSecondByRound: rates,
    exhaustedRounds: reapingRuns.filter((run) => run.backlogAfter === 0).map((run) => run.round),
  };
}
