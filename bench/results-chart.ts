import { parse, View } from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';
import type { ScenarioRun, ScenarioSummary } from './statistics.js';

/** One view of an `hconcat`: vega-lite exports only its top-level spec type. */
type PanelSpec = Extract<TopLevelSpec, { hconcat: unknown }>['hconcat'][number];

interface ChartRow {
  scenario: string;
  round: number;
  requestsPerSecond: number;
  p99Ms: number;
}

/** One process's median CPU time per request in one scenario. */
interface CpuRow {
  scenario: string;
  process: string;
  microsPerRequest: number;
}

/**
 * The results as an SVG: throughput and p99 latency by scenario, a bar for
 * the median over rounds and a dot for each round, so the spread between
 * rounds is as visible as the median; and the median CPU time per request of
 * the app, PostgreSQL and Redis, stacked. Rendered headless: vega-lite compiles
 * to a vega spec, and a vega View without a renderer writes the SVG.
 */
export async function renderResultsChart(runs: readonly ScenarioRun[], summaries: readonly ScenarioSummary[], subtitle: string): Promise<string> {
  const labelOf = new Map(summaries.map((summary) => [summary.id, summary.label]));
  const values: ChartRow[] = runs.map((run) => ({
    scenario: labelOf.get(run.scenario) ?? run.scenario,
    round: run.round,
    requestsPerSecond: round1(run.measured.requestsPerSecond),
    p99Ms: round1(run.measured.latencyMs.p99),
  }));
  const order = summaries.map((summary) => summary.label);
  const cpu: CpuRow[] = summaries.flatMap((summary) =>
    (['app', 'postgres', 'redis'] as const).flatMap((process) => {
      const micros = summary.medianCpuMicrosPerRequest[process];
      return micros === undefined ? [] : [{ scenario: summary.label, process: process === 'postgres' ? 'PostgreSQL' : process === 'app' ? 'app' : 'Redis', microsPerRequest: Math.round(micros) }];
    }),
  );
  const spec: TopLevelSpec = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: { text: 'Idempotency layer against the bare business transaction', subtitle: [subtitle, 'bars: median over rounds; dots: one per round'], anchor: 'start' },
    hconcat: [
      { data: { values }, ...panel('requestsPerSecond', 'requests per second', order, ',.0f') },
      { data: { values }, ...panel('p99Ms', 'p99 latency (ms)', order, '.1f') },
      ...(cpu.length ? [cpuPanel(cpu, order)] : []),
    ],
    config: { font: 'sans-serif', view: { stroke: null } },
  };
  return renderChart(spec);
}

/** Renders a vega-lite spec to SVG without a browser: compiled to vega, drawn by a View with no renderer. */
export async function renderChart(spec: TopLevelSpec): Promise<string> {
  const view = new View(parse(compile(spec).spec), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/** Median CPU µs per request by scenario, one stacked segment per process. */
function cpuPanel(rows: CpuRow[], order: string[]): PanelSpec {
  return {
    data: { values: rows },
    width: 380,
    height: 240,
    title: 'CPU µs per request (medians)',
    mark: 'bar',
    encoding: {
      x: { field: 'scenario', type: 'nominal', sort: order, title: null, axis: { labelAngle: -35 } },
      y: { field: 'microsPerRequest', type: 'quantitative', stack: 'zero', title: null },
      color: { field: 'process', type: 'nominal', sort: ['app', 'PostgreSQL', 'Redis'], title: null, legend: { orient: 'bottom' } },
    },
  };
}

/** One measure by scenario: median bar, its value above it, and a dot per round. */
function panel(field: keyof ChartRow, title: string, order: string[], format: string): PanelSpec {
  const x = { field: 'scenario', type: 'nominal', sort: order, title: null, axis: { labelAngle: -35 } } as const;
  return {
    width: 380,
    height: 240,
    title,
    layer: [
      { mark: { type: 'bar', color: '#9ecae1' }, encoding: { x, y: { aggregate: 'median', field, type: 'quantitative', title: null } } },
      {
        mark: { type: 'text', dy: -6, fontSize: 10 },
        encoding: { x, y: { aggregate: 'median', field, type: 'quantitative' }, text: { aggregate: 'median', field, type: 'quantitative', format } },
      },
      { mark: { type: 'point', filled: true, color: '#08519c', size: 36, opacity: 0.8 }, encoding: { x, y: { field, type: 'quantitative' } } },
    ],
  };
}

function round1(value: number): number {
  return Math.round(value * 10) / 10;
}
