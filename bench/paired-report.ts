import type { HeadlineMeasure } from './paired-schedule.js';
import { type ComparisonSummary, type HeadlineRow, type PairedWindow, pairsOf, type Spread, type VariantSummary } from './paired-statistics.js';
import type { Twins } from './scenarios.js';
import { fixed, table } from './report-table.js';

/**
 * The printed report of a paired run: each comparison's median per-pair
 * ratios of throughput and of CPU per request, each with the interval that
 * holds it, and the CPU differences; then each variant's medians, CPU per
 * request included.
 */
export function formatPairedReport(comparisons: readonly ComparisonSummary[], variants: readonly VariantSummary[], headline?: readonly HeadlineRow[]): string {
  const throughput = table(
    ['comparison', 'pairs', 'req/s ratio', '95% interval', '±', 'p99 ratio', 'IQR of the ratios'],
    comparisons.map((comparison) => [
      comparison.name,
      String(comparison.pairs),
      fixed(comparison.throughput.median, 3),
      interval(comparison.throughput, 3),
      halfWidth(comparison.throughput),
      fixed(comparison.p99?.median ?? NaN, 2),
      `${fixed(comparison.throughput.q1, 3)}–${fixed(comparison.throughput.q3, 3)}`,
    ]),
  );
  const cpu = table(
    ['comparison', 'CPU ratio', '95% interval', '±', 'app µs/req Δ', '95% interval', 'pg µs/req Δ', '95% interval'],
    comparisons.map((comparison) => [
      comparison.name,
      fixed(comparison.cpu?.median ?? NaN, 3),
      comparison.cpu ? interval(comparison.cpu, 3) : '-',
      comparison.cpu ? halfWidth(comparison.cpu) : '-',
      signed(comparison.appCpuMicros?.median),
      comparison.appCpuMicros ? interval(comparison.appCpuMicros, 0) : '-',
      signed(comparison.postgresCpuMicros?.median),
      comparison.postgresCpuMicros ? interval(comparison.postgresCpuMicros, 0) : '-',
    ]),
  );
  const byVariant = table(
    ['variant', 'windows', 'req/s', 'IQR', 'p50 ms', 'p99 ms', 'app µs/req', 'IQR', 'pg µs/req', 'IQR', 'redis µs/req', 'non-2xx', 'statuses'],
    variants.map((variant) => {
      const { app, postgres, redis } = variant.cpuMicrosPerRequest;
      return [
        variant.label,
        String(variant.windows),
        fixed(variant.requestsPerSecond.median, 0),
        `${fixed(variant.requestsPerSecond.q1, 0)}–${fixed(variant.requestsPerSecond.q3, 0)}`,
        fixed(variant.medianP50Ms, 1),
        fixed(variant.medianP99Ms, 1),
        fixed(app?.median ?? NaN, 0),
        app ? `${fixed(app.q1, 0)}–${fixed(app.q3, 0)}` : '-',
        fixed(postgres?.median ?? NaN, 0),
        postgres ? `${fixed(postgres.q1, 0)}–${fixed(postgres.q3, 0)}` : '-',
        fixed(redis?.median ?? NaN, 0),
        String(variant.non2xx),
        Object.entries(variant.statusCounts)
          .map(([status, count]) => `${status}×${count}`)
          .join(' '),
      ];
    }),
  );
  const fewPairs = comparisons.some((comparison) => comparison.throughput.confidence < 0.95);
  return [
    'Paired comparisons: medians of the per-pair ratios (subject ÷ base) and differences (subject − base). The 95% interval',
    'holds the median (order statistics of the pairs); ± is its half-width as a share of the median: what the run resolves.',
    ...(fewPairs ? ["With fewer than 6 pairs the interval is the pairs' range, and holds the median less often than 95%."] : []),
    ...(headline?.length ? ['', 'Headline: the figures the profile stands for', formatHeadline(headline)] : []),
    '',
    'Throughput',
    throughput,
    '',
    'CPU per request: the ratio of app + PostgreSQL + Redis µs, and the differences of app and of PostgreSQL µs',
    cpu,
    '',
    'Variants: medians over windows, with the interquartile range of the windows',
    byVariant,
  ].join('\n');
}

/** A profile's headline as a table: each figure's median, its interval and ±, and the pairs it comes from; `-` where none ran. */
export function formatHeadline(rows: readonly HeadlineRow[]): string {
  return table(
    ['figure', 'median', '95% interval', '±', 'pairs', 'comparison'],
    rows.map((row) => {
      const digits = DIGITS[row.measure];
      const show = (value: number) => (digits === 0 ? signed(value) : fixed(value, digits));
      return row.spread
        ? [row.label, show(row.spread.median), interval(row.spread, digits), digits === 0 ? `${fixed((row.spread.high - row.spread.low) / 2, 0)} µs` : halfWidth(row.spread), String(row.pairs), row.comparison ?? '-']
        : [row.label, '-', '-', '-', '0', row.comparison ?? 'not run'];
    }),
  );
}

/** Ratios to 3 digits (p99's to 2, as in the throughput table), differences of µs whole and signed. */
const DIGITS: Record<HeadlineMeasure, number> = { throughput: 3, p99: 2, cpu: 3, appCpuMicros: 0, postgresCpuMicros: 0 };

/** One window as it is measured, with the pair it closes, if it closes one (of the run's comparisons). */
export function windowLine(window: PairedWindow, previous: PairedWindow | undefined, label: string, windows: number, comparisons?: readonly Twins[]): string {
  const { requestsPerSecond, latencyMs, non2xx } = window.measured;
  const redis = window.cpu.redisMicrosPerRequest !== undefined ? ` redis ${fixed(window.cpu.redisMicrosPerRequest, 0)}` : '';
  const cpu = `CPU µs/req app ${fixed(window.cpu.appMicrosPerRequest, 0)} pg ${fixed(window.cpu.postgresMicrosPerRequest ?? NaN, 0)}${redis}`;
  const [pair] = previous ? pairsOf([previous, window], comparisons) : [];
  const paired = pair ? `  ${pair.comparison} ${fixed(pair.throughputRatio, 2)}` : '';
  const problems = window.problems.length ? `  PROBLEM: ${window.problems.join('; ')}` : '';
  const numbers = `${fixed(requestsPerSecond, 0).padStart(6)} req/s  p50 ${fixed(latencyMs.p50, 1).padStart(5)} ms  p99 ${fixed(latencyMs.p99, 1).padStart(6)} ms  ${cpu}  non-2xx ${non2xx}`;
  return `window ${String(window.index).padStart(String(windows).length)}/${windows}  ${label.padEnd(30)} ${numbers}${paired}${problems}`;
}

function interval(spread: Spread, digits: number): string {
  return `${fixed(spread.low, digits)}–${fixed(spread.high, digits)}`;
}

/** Half the interval's width as a percentage of the median: how far apart two variants must be for this run to tell them apart. */
function halfWidth(spread: Spread): string {
  return `${fixed((50 * (spread.high - spread.low)) / Math.abs(spread.median), 1)}%`;
}

function signed(value: number | undefined): string {
  return value === undefined || !Number.isFinite(value) ? '-' : `${value >= 0 ? '+' : ''}${value.toFixed(0)}`;
}
