import type { TopLevelSpec } from 'vega-lite';
import type { ReapingReport } from './growth-report.js';
import { GROWTH_SCENARIOS, type SizeRun } from './growth-results.js';
import { formatCount } from './growth-sizes.js';
import { renderChart } from './results-chart.js';

/** One view of an `hconcat`: vega-lite exports only its top-level spec type. */
type PanelSpec = Extract<TopLevelSpec, { hconcat: unknown }>['hconcat'][number];

type Row = Record<string, string | number>;

/** The reaping part's first executions run with the module's defaults. */
const REAPING_LABEL = 'first execution';

/**
 * The growth results as an SVG: throughput and p99 by table size for each
 * scenario, and first-execution p99 without and with the reaper deleting;
 * a bar for the median over rounds and a dot per round, as in the main chart.
 */
export async function renderGrowthChart(runs: readonly SizeRun[], sizes: readonly number[], reaping: ReapingReport | undefined, subtitle: string): Promise<string> {
  const labelOf = new Map(GROWTH_SCENARIOS.map((scenario) => [scenario.id, scenario.label]));
  const scenarioOrder = GROWTH_SCENARIOS.map((scenario) => scenario.label);
  const sizeOrder = sizes.map(formatCount);
  const values: Row[] = runs.map((run) => ({
    records: formatCount(run.size),
    scenario: labelOf.get(run.scenario)!,
    round: run.round,
    requestsPerSecond: round1(run.measured.requestsPerSecond),
    p99Ms: round1(run.measured.latencyMs.p99),
  }));
  const panels: PanelSpec[] = [
    grouped(values, 'requestsPerSecond', 'requests per second by records in the table', sizeOrder, scenarioOrder, ',.0f'),
    grouped(values, 'p99Ms', 'p99 latency (ms) by records in the table', sizeOrder, scenarioOrder, '.1f'),
  ];
  const lines = [subtitle, 'bars: median over rounds; dots: one per round'];
  if (reaping) {
    const reapingValues: Row[] = reaping.runs.map((run) => ({
      records: run.variant === 'idle' ? 'no reaping' : 'reaping',
      scenario: REAPING_LABEL,
      round: run.round,
      p99Ms: round1(run.measured.latencyMs.p99),
    }));
    panels.push(grouped(reapingValues, 'p99Ms', `first-execution p99 (ms), ${formatCount(reaping.backlog)} expired records`, ['no reaping', 'reaping'], [REAPING_LABEL], '.1f'));
    lines.push(`reaper: ${reaping.summary.medianReapedPerSecond.toFixed(0)} rows/s while the claims ran; p99 reaping ÷ no reaping ${reaping.summary.p99Ratio.toFixed(2)} (target below ${reaping.summary.p99Target})`);
  }
  return renderChart({
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: { text: 'Idempotency layer as idempotency_records grows', subtitle: lines, anchor: 'start' },
    hconcat: panels,
    config: { font: 'sans-serif', view: { stroke: null } },
  });
}

/** One measure by group (`records`), a bar per scenario side by side: median bar, its value, and a dot per round. */
function grouped(values: Row[], field: string, title: string, groups: string[], scenarios: string[], format: string): PanelSpec {
  const x = { field: 'records', type: 'nominal', sort: groups, title: null, axis: { labelAngle: 0 } } as const;
  const xOffset = { field: 'scenario', type: 'nominal', sort: scenarios } as const;
  // Without a canvas, vega estimates label widths generously: the default limit would cut the scenarios' labels.
  const color = { field: 'scenario', type: 'nominal', sort: scenarios, title: null, legend: { orient: 'bottom', labelLimit: 240 } } as const;
  const median = { aggregate: 'median', field, type: 'quantitative' } as const;
  return {
    data: { values },
    width: 320,
    height: 240,
    title,
    layer: [
      { mark: { type: 'bar', opacity: 0.55 }, encoding: { x, xOffset, color, y: { ...median, title: null } } },
      { mark: { type: 'text', dy: -6, fontSize: 9 }, encoding: { x, xOffset, y: median, text: { ...median, format } } },
      { mark: { type: 'point', filled: true, size: 28, opacity: 0.9 }, encoding: { x, xOffset, color, y: { field, type: 'quantitative' } } },
    ],
  };
}

function round1(value: number): number {
  return Math.round(value * 10) / 10;
}
