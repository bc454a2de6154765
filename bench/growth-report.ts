import type { ReapingRun, ReapingSummary, SizeRun, SizeSummary } from './growth-results.js';
import { GROWTH_SCENARIOS } from './growth-results.js';
import { formatCount } from './growth-sizes.js';
import type { TableStats } from './growth-table.js';
import { fixed, table } from './report-table.js';

/** `idempotency_records` of one size, after seeding and at the end of the run. */
export interface SizedTable {
  size: number;
  atStart: TableStats;
  atEnd: TableStats;
}

/** The reaping part: its runs, summary, and the table before and after. */
export interface ReapingReport {
  backlog: number;
  runs: ReapingRun[];
  summary: ReapingSummary;
  tableBefore: TableStats;
  tableAfter: TableStats;
  /** EXPLAIN of the reaper's batch before and after the reaping part. */
  planBefore: string[];
  planAfter: string[];
}

const labelOf = new Map(GROWTH_SCENARIOS.map((scenario) => [scenario.id, scenario.label]));

/** The printed report: table shapes, per-round numbers, medians with ratios against the smallest size, and the reaping part. */
export function formatGrowthReport(tables: readonly SizedTable[], runs: readonly SizeRun[], summaries: readonly SizeSummary[], reaping: ReapingReport | undefined): string {
  const base = formatCount(tables[0]?.size ?? 0);
  const rounds = Math.max(0, ...summaries.map((summary) => summary.rounds));
  const lines = [
    'idempotency_records per size: after seeding and VACUUM ANALYZE → at the end of the run',
    tableShapes(tables),
    '',
    'Per round (measured phase only)',
    table(
      ['records', 'scenario', 'round', 'req/s', 'p50 ms', 'p99 ms', 'non-2xx'],
      [...runs]
        .sort((a, b) => a.size - b.size || order(a.scenario) - order(b.scenario) || a.round - b.round)
        .map((run) => [formatCount(run.size), labelOf.get(run.scenario)!, String(run.round), fixed(run.measured.requestsPerSecond, 0), fixed(run.measured.latencyMs.p50, 1), fixed(run.measured.latencyMs.p99, 1), String(run.measured.non2xx)]),
    ),
    '',
    `Median over ${rounds} round${rounds === 1 ? '' : 's'}; ratios are of medians, against the same scenario with ${base} records`,
    table(
      ['scenario', 'records', 'req/s', 'p50 ms', 'p99 ms', `req/s ÷ ${base}`, 'per round', `p99 ÷ ${base}`, 'non-2xx', 'statuses'],
      summaries.map((summary) => [
        labelOf.get(summary.scenario)!,
        formatCount(summary.size),
        fixed(summary.medianRequestsPerSecond, 0),
        fixed(summary.medianP50Ms, 1),
        fixed(summary.medianP99Ms, 1),
        fixed(summary.throughputRatio, 2),
        summary.throughputRatioByRound.map((value) => fixed(value, 2)).join(' '),
        fixed(summary.p99Ratio, 2),
        String(summary.non2xx),
        Object.entries(summary.statusCounts).map(([status, count]) => `${status}×${count}`).join(' '),
      ]),
    ),
    'Replays through the cache never read the table: their ratios show how far this run drifted between windows by itself.',
  ];
  if (reaping) lines.push('', ...reapingLines(reaping));
  return lines.join('\n');
}

function tableShapes(tables: readonly SizedTable[]): string {
  const both = (pick: (stats: TableStats) => string) => (entry: SizedTable) => `${pick(entry.atStart)} → ${pick(entry.atEnd)}`;
  const columns: Array<[string, (entry: SizedTable) => string]> = [
    ['seeded', (entry) => formatCount(entry.size)],
    ['rows', both((stats) => formatCount(stats.rows))],
    ['total size', both((stats) => bytes(stats.totalBytes))],
    ['heap', both((stats) => bytes(stats.heapBytes))],
    ['primary key', both((stats) => bytes(stats.primaryKeyBytes))],
    ['pk levels', both((stats) => String(stats.primaryKeyLevels ?? '-'))],
    ['pk leaf density', both((stats) => percent(stats.primaryKeyLeafDensity))],
    ['expires_at index', both((stats) => bytes(stats.expiresAtIndexBytes))],
    ['dead rows', both((stats) => formatCount(stats.deadRows))],
    ['HOT / all updates', both((stats) => `${formatCount(stats.hotUpdates)}/${formatCount(stats.updates)}`)],
    ['autovacuums', both((stats) => String(stats.autovacuums))],
  ];
  return table(
    columns.map(([header]) => header),
    tables.map((entry) => columns.map(([, cell]) => cell(entry))),
  );
}

function reapingLines(reaping: ReapingReport): string[] {
  const { summary, tableBefore, tableAfter, planBefore, planAfter } = reaping;
  const samePlan = planBefore.join('\n') === planAfter.join('\n');
  const perRound = table(
    ['variant', 'round', 'req/s', 'p50 ms', 'p99 ms', 'non-2xx', 'backlog before', 'after', 'reaped rows/s', 'topped up'],
    [...reaping.runs]
      .sort((a, b) => a.variant.localeCompare(b.variant) || a.round - b.round)
      .map((run) => [
        run.variant === 'idle' ? 'no reaping' : 'reaping',
        String(run.round),
        fixed(run.measured.requestsPerSecond, 0),
        fixed(run.measured.latencyMs.p50, 1),
        fixed(run.measured.latencyMs.p99, 1),
        String(run.measured.non2xx),
        run.backlogBefore.toLocaleString('en-US'),
        run.backlogAfter.toLocaleString('en-US'),
        fixed(run.reapedPerSecond, 0),
        run.toppedUp.toLocaleString('en-US'),
      ]),
  );
  const met = summary.p99Ratio < summary.p99Target ? 'met' : 'NOT met';
  const exhausted = summary.exhaustedRounds.length
    ? [`  the backlog ran out in round ${summary.exhaustedRounds.join(', ')}: the reaper idled for part of the window, so its rate and its cost are understated`]
    : [];
  return [
    `First executions, the module's defaults, while the reaper deletes a backlog of ${reaping.backlog.toLocaleString('en-US')} expired records (measured phase only)`,
    perRound,
    '',
    'Ratios of medians, reaping ÷ no reaping',
    `  first execution p99           ${fixed(summary.idle.medianP99Ms, 1)} ms → ${fixed(summary.reaping.medianP99Ms, 1)} ms: ${fixed(summary.p99Ratio, 2)} (target below ${fixed(summary.p99Target, 2)}: ${met})`,
    `  first execution throughput    ${fixed(summary.idle.medianRequestsPerSecond, 0)} → ${fixed(summary.reaping.medianRequestsPerSecond, 0)} req/s: ${fixed(summary.throughputRatio, 2)}`,
    `  reaper while the claims ran   ${fixed(summary.medianReapedPerSecond, 0)} rows/s median (per round: ${summary.reapedPerSecondByRound.map((rate) => fixed(rate, 0)).join(' ')})`,
    ...exhausted,
    `  table before → after          ${bytes(tableBefore.totalBytes)} → ${bytes(tableAfter.totalBytes)}; dead rows ${formatCount(tableBefore.deadRows)} → ${formatCount(tableAfter.deadRows)}; autovacuums ${tableBefore.autovacuums} → ${tableAfter.autovacuums}`,
    `  expires_at index              ${bytes(tableBefore.expiresAtIndexBytes)} → ${bytes(tableAfter.expiresAtIndexBytes)}, leaf density ${percent(tableBefore.expiresAtLeafDensity)} → ${percent(tableAfter.expiresAtLeafDensity)}`,
    `  reaper's batch plan           ${samePlan ? 'unchanged' : 'CHANGED'}: ${planAfter.join(' / ')}`,
    ...(samePlan ? [] : [`  before: ${planBefore.join(' / ')}`]),
  ];
}

function order(id: SizeRun['scenario']): number {
  return GROWTH_SCENARIOS.findIndex((scenario) => scenario.id === id);
}

function bytes(count: number): string {
  return count >= 2 ** 30 ? `${(count / 2 ** 30).toFixed(2)} GiB` : `${(count / 2 ** 20).toFixed(count >= 100 * 2 ** 20 ? 0 : 1)} MiB`;
}

function percent(value: number | undefined): string {
  return value === undefined || !Number.isFinite(value) ? '-' : `${value.toFixed(0)}%`;
}
