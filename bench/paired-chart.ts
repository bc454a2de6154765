import type { TopLevelSpec } from 'vega-lite';
import type { ComparisonSummary, Pair, Spread } from './paired-statistics.js';
import { renderChart } from './results-chart.js';

/** One view of an `hconcat`: vega-lite exports only its top-level spec type. */
type PanelSpec = Extract<TopLevelSpec, { hconcat: unknown }>['hconcat'][number];

/** One measure of a paired run: how each pair reads it, and where its summary is kept. */
interface Measure {
  title: string;
  /** What means "no difference": 1 for ratios, 0 for differences. */
  reference: number;
  ofPair(pair: Pair): number | undefined;
  ofComparison(comparison: ComparisonSummary): Spread | undefined;
}

const MEASURES: readonly Measure[] = [
  { title: 'req/s ratio (subject ÷ base)', reference: 1, ofPair: (pair) => pair.throughputRatio, ofComparison: (comparison) => comparison.throughput },
  { title: 'CPU µs/req ratio, all processes', reference: 1, ofPair: (pair) => pair.cpuRatio, ofComparison: (comparison) => comparison.cpu },
  { title: 'app CPU µs/req, subject − base', reference: 0, ofPair: (pair) => pair.appCpuMicros, ofComparison: (comparison) => comparison.appCpuMicros },
  { title: 'PostgreSQL CPU µs/req, subject − base', reference: 0, ofPair: (pair) => pair.postgresCpuMicros, ofComparison: (comparison) => comparison.postgresCpuMicros },
];

/**
 * A paired run as an SVG: for each comparison and measure, a dot per pair,
 * the median, and the 95% interval that holds it, next to the line of no
 * difference; an interval that does not cross the line is a difference the
 * run resolved.
 */
export function renderPairedChart(pairs: readonly Pair[], comparisons: readonly ComparisonSummary[], subtitle: string): Promise<string> {
  const order = comparisons.map((comparison) => comparison.name);
  const spec: TopLevelSpec = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: { text: 'Paired windows: each comparison of two variants, pair by pair', subtitle: [subtitle, 'dots: pairs; red tick: median; line: the 95% interval that holds it'], anchor: 'start' },
    hconcat: MEASURES.map((measure, position) => panel(measure, pairs, comparisons, order, position === 0)),
    config: { font: 'sans-serif', view: { stroke: null } },
  };
  return renderChart(spec);
}

function panel(measure: Measure, pairs: readonly Pair[], comparisons: readonly ComparisonSummary[], order: string[], labelled: boolean): PanelSpec {
  const y = { field: 'comparison', type: 'nominal', sort: order, title: null, axis: labelled ? { labelLimit: 600 } : null } as const;
  // Ratios on a log scale, where ×2 and ÷2 lie as far from 1; differences on a linear one.
  const scale = measure.reference === 1 ? ({ type: 'log', nice: false, padding: 8 } as const) : ({ zero: false } as const);
  const x = (field: string) => ({ field, type: 'quantitative', title: null, scale }) as const;
  const dots = pairs.flatMap((pair) => {
    const value = measure.ofPair(pair);
    return value === undefined || !Number.isFinite(value) ? [] : [{ comparison: pair.comparison, value }];
  });
  const summaries = comparisons.flatMap((comparison) => {
    const spread = measure.ofComparison(comparison);
    return spread ? [{ comparison: comparison.name, median: spread.median, low: spread.low, high: spread.high }] : [];
  });
  return {
    width: 220,
    height: { step: 22 },
    title: measure.title,
    layer: [
      { data: { values: [{ reference: measure.reference }] }, mark: { type: 'rule', color: '#999', strokeDash: [4, 3] }, encoding: { x: x('reference') } },
      { data: { values: summaries }, mark: { type: 'rule', color: '#08306b', strokeWidth: 2 }, encoding: { y, x: x('low'), x2: { field: 'high' } } },
      { data: { values: summaries }, mark: { type: 'tick', color: '#cb181d', thickness: 2 }, encoding: { y, x: x('median') } },
      // Just below the interval's line, so that it hides none of them.
      { data: { values: dots }, mark: { type: 'point', filled: true, color: '#6baed6', size: 16, opacity: 0.7 }, encoding: { y, yOffset: { value: 7 }, x: x('value') } },
    ],
  };
}
