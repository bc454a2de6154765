import type { CpuCost } from './cpu-cost.js';
import type { PhaseResult } from './load-protocol.js';
import { COMPARISONS, comparisonOf, type HeadlineFigure } from './paired-schedule.js';
import type { Scenario, ScenarioId, Twins } from './scenarios.js';

/** The share of repeated runs in which `medianInterval` is to hold the true median. */
const CONFIDENCE = 0.95;

/** One window of a paired run: its variant's load, measured after it settled. */
export interface PairedWindow {
  /** Its place in the run, from 1. */
  index: number;
  variant: ScenarioId;
  measured: PhaseResult;
  /** CPU time of the app, PostgreSQL and (for the peer) Redis over the window. */
  cpu: CpuCost;
  problems: string[];
}

/** Two neighbouring windows whose variants make a comparison: the subject's figures against the base's. */
export interface Pair {
  comparison: string;
  /** The two windows' indexes, in the order they ran. */
  windows: [number, number];
  subjectFirst: boolean;
  throughputRatio: number;
  p99Ratio: number;
  /**
   * Subject ÷ base CPU µs per request of the app, PostgreSQL and Redis
   * together (each where measured): what a request costs the machine. On
   * shared CPUs it moves less than throughput, which also follows how much
   * CPU the other work left to the run.
   */
  cpuRatio: number;
  /** Subject − base CPU µs per request, where both windows measured it. */
  appCpuMicros?: number;
  postgresCpuMicros?: number;
}

/** The median of some values, their quartiles, and an interval that holds the median with the given confidence. */
export interface Spread {
  median: number;
  q1: number;
  q3: number;
  /** Order statistics of the values (see `medianInterval`); from fewer than 6 values, the extremes, with less confidence. */
  low: number;
  high: number;
  /** What `low`–`high` hold the median with: 0.95, or less from few values. */
  confidence: number;
  count: number;
}

/** One comparison over all its pairs: medians of the per-pair ratios (throughput, p99) and differences (CPU). */
export interface ComparisonSummary extends Twins {
  pairs: number;
  /** Pairs whose subject window ran first: about half, so that neither order is favoured. */
  subjectFirst: number;
  throughput: Spread;
  /** Unset where no pair had answers on both sides. */
  p99?: Spread;
  cpu?: Spread;
  appCpuMicros?: Spread;
  postgresCpuMicros?: Spread;
}

/** One variant over all its windows. */
export interface VariantSummary {
  id: ScenarioId;
  label: string;
  windows: number;
  requestsPerSecond: Spread;
  medianP50Ms: number;
  medianP99Ms: number;
  cpuMicrosPerRequest: { app?: Spread; postgres?: Spread; redis?: Spread };
  /** Summed over windows. */
  statusCounts: Record<string, number>;
  non2xx: number;
  problems: string[];
}

/** Every pair of neighbouring windows that makes a comparison, in run order. */
export function pairsOf(windows: readonly PairedWindow[], comparisons: readonly Twins[] = COMPARISONS): Pair[] {
  return windows.slice(1).flatMap((later, position) => {
    const earlier = windows[position];
    const comparison = comparisonOf(earlier.variant, later.variant, comparisons);
    if (!comparison) return [];
    const subjectFirst = earlier.variant === comparison.subject;
    const [subject, base] = subjectFirst ? [earlier, later] : [later, earlier];
    const difference = (read: (cost: CpuCost) => number | undefined) => {
      const [a, b] = [read(subject.cpu), read(base.cpu)];
      return a === undefined || b === undefined ? undefined : a - b;
    };
    return [
      {
        comparison: comparison.name,
        windows: [earlier.index, later.index],
        subjectFirst,
        throughputRatio: subject.measured.requestsPerSecond / base.measured.requestsPerSecond,
        p99Ratio: subject.measured.latencyMs.p99 / base.measured.latencyMs.p99,
        cpuRatio: machineMicros(subject.cpu) / machineMicros(base.cpu),
        appCpuMicros: difference((cost) => cost.appMicrosPerRequest),
        postgresCpuMicros: difference((cost) => cost.postgresMicrosPerRequest),
      },
    ];
  });
}

/** Every comparison that has pairs with answers on both sides, in the order given (the default profile's `COMPARISONS`). */
export function summariseComparisons(pairs: readonly Pair[], comparisons: readonly Twins[] = COMPARISONS): ComparisonSummary[] {
  return comparisons.flatMap((comparison) => {
    const own = pairs.filter((pair) => pair.comparison === comparison.name);
    const throughput = spreadOf(own.map((pair) => pair.throughputRatio));
    if (!throughput) return [];
    return [
      {
        ...comparison,
        pairs: own.length,
        subjectFirst: own.filter((pair) => pair.subjectFirst).length,
        throughput,
        p99: spreadOf(own.map((pair) => pair.p99Ratio)),
        cpu: spreadOf(own.map((pair) => pair.cpuRatio)),
        appCpuMicros: spreadOf(own.map((pair) => pair.appCpuMicros)),
        postgresCpuMicros: spreadOf(own.map((pair) => pair.postgresCpuMicros)),
      },
    ];
  });
}

/** One figure of a profile's headline, read off its comparison's summary: a median with its interval, or nothing where the comparison made no pair. */
export interface HeadlineRow extends HeadlineFigure {
  comparison?: string;
  pairs: number;
  spread?: Spread;
}

/** The headline's figures, in its order, from the run's comparison summaries (either orientation of a comparison is not looked for: the profile names its own). */
export function headlineOf(figures: readonly HeadlineFigure[], comparisons: readonly ComparisonSummary[]): HeadlineRow[] {
  return figures.map((figure) => {
    const comparison = comparisons.find((candidate) => candidate.subject === figure.subject && candidate.base === figure.base);
    const spread = comparison?.[figure.measure];
    return { ...figure, comparison: comparison?.name, pairs: spread?.count ?? 0, ...(spread && { spread }) };
  });
}

/** Every variant that ran, in the order given. */
export function summariseVariants(variants: readonly Scenario[], windows: readonly PairedWindow[]): VariantSummary[] {
  return variants.flatMap((variant) => {
    const own = windows.filter((window) => window.variant === variant.id);
    if (own.length === 0) return [];
    const statusCounts: Record<string, number> = {};
    for (const { measured } of own) for (const [status, count] of Object.entries(measured.statusCounts)) statusCounts[status] = (statusCounts[status] ?? 0) + count;
    return [
      {
        id: variant.id,
        label: variant.label,
        windows: own.length,
        requestsPerSecond: spreadOf(own.map((window) => window.measured.requestsPerSecond))!,
        medianP50Ms: spreadOf(own.map((window) => window.measured.latencyMs.p50))?.median ?? NaN,
        medianP99Ms: spreadOf(own.map((window) => window.measured.latencyMs.p99))?.median ?? NaN,
        cpuMicrosPerRequest: {
          app: spreadOf(own.map((window) => window.cpu.appMicrosPerRequest)),
          postgres: spreadOf(own.map((window) => window.cpu.postgresMicrosPerRequest)),
          redis: spreadOf(own.map((window) => window.cpu.redisMicrosPerRequest)),
        },
        statusCounts,
        non2xx: own.reduce((total, window) => total + window.measured.non2xx, 0),
        problems: own.flatMap((window) => window.problems.map((problem) => `window ${window.index} ${problem}`)),
      },
    ];
  });
}

/** CPU µs per request of every process measured: the app, PostgreSQL where readable, Redis in the peer's windows. */
function machineMicros(cost: CpuCost): number {
  return cost.appMicrosPerRequest + (cost.postgresMicrosPerRequest ?? 0) + (cost.redisMicrosPerRequest ?? 0);
}

/** The spread of the finite values, or undefined when there is none (not measured). */
export function spreadOf(values: ReadonlyArray<number | undefined>): Spread | undefined {
  const sorted = values.filter((value): value is number => value !== undefined && Number.isFinite(value)).sort((a, b) => a - b);
  if (sorted.length === 0) return undefined;
  return { median: quantile(sorted, 0.5), q1: quantile(sorted, 0.25), q3: quantile(sorted, 0.75), ...medianInterval(sorted), count: sorted.length };
}

/** The q-quantile of sorted values, interpolated between the two nearest (as R's default and numpy's do). */
function quantile(sorted: readonly number[], q: number): number {
  const position = (sorted.length - 1) * q;
  const below = Math.floor(position);
  const above = Math.min(below + 1, sorted.length - 1);
  return sorted[below] + (position - below) * (sorted[above] - sorted[below]);
}

/**
 * A distribution-free interval for the median of sorted values: the k-th
 * smallest and the k-th largest, with the largest k whose interval holds
 * the true median in at least 95% of runs. Each value falls below the
 * median with probability ½, so the count below it is Binomial(n, ½) and
 * the interval fails only when k or more values, or n − k + 1 or more,
 * fall below it. It assumes nothing of the values' shape: per-pair ratios
 * on a shared machine have long tails that a normal interval would hide.
 */
function medianInterval(sorted: readonly number[]): Pick<Spread, 'low' | 'high' | 'confidence'> {
  const n = sorted.length;
  // P(X = j) and P(X <= k - 1) for X ~ Binomial(n, ½), growing k while the interval still holds the median often enough.
  let k = 1;
  let point = 0.5 ** n;
  let tail = point;
  while (k < n / 2) {
    point = (point * (n - k + 1)) / k;
    if (1 - 2 * (tail + point) < CONFIDENCE) break;
    tail += point;
    k++;
  }
  return { low: sorted[k - 1], high: sorted[n - k], confidence: Math.max(0, 1 - 2 * tail) };
}
