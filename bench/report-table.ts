import type { HeadlineRatios, RatioToBare, ScenarioRun, ScenarioSummary, TwinRatio } from './statistics.js';

/** The printed report: per-round numbers, medians with ratios and CPU per request, the headline ratios, the twins and the burst outcomes. */
export function formatReport(
  runs: readonly ScenarioRun[],
  summaries: readonly ScenarioSummary[],
  ratios: readonly RatioToBare[],
  headline: HeadlineRatios,
  twins: readonly TwinRatio[] = [],
): string {
  const labelOf = new Map(summaries.map((summary) => [summary.id, summary.label]));
  const perRound = table(
    ['scenario', 'round', 'req/s', 'p50 ms', 'p99 ms', 'app µs/req', 'pg µs/req', 'redis µs/req', 'non-2xx'],
    [...runs]
      .sort((a, b) => summaries.findIndex((s) => s.id === a.scenario) - summaries.findIndex((s) => s.id === b.scenario) || a.round - b.round)
      .map((run) => [
        labelOf.get(run.scenario) ?? run.scenario,
        String(run.round),
        fixed(run.measured.requestsPerSecond, 0),
        fixed(run.measured.latencyMs.p50, 1),
        fixed(run.measured.latencyMs.p99, 1),
        ...cpuCells({ app: run.cpu.appMicrosPerRequest, postgres: run.cpu.postgresMicrosPerRequest, redis: run.cpu.redisMicrosPerRequest }),
        String(run.measured.non2xx),
      ]),
  );
  const ratioOf = new Map(ratios.map((ratio) => [ratio.id, ratio]));
  const medians = table(
    ['scenario', 'req/s', 'p50 ms', 'p99 ms', 'app µs/req', 'pg µs/req', 'redis µs/req', 'req/s ÷ bare', 'per round', 'p99 ÷ bare', 'non-2xx', 'statuses'],
    summaries.map((summary) => {
      const ratio = ratioOf.get(summary.id);
      return [
        summary.label,
        fixed(summary.medianRequestsPerSecond, 0),
        fixed(summary.medianP50Ms, 1),
        fixed(summary.medianP99Ms, 1),
        ...cpuCells(summary.medianCpuMicrosPerRequest),
        ratio ? fixed(ratio.throughput, 2) : '-',
        ratio ? ratio.throughputByRound.map((value) => fixed(value, 2)).join(' ') : '-',
        ratio ? fixed(ratio.p99, 2) : '-',
        String(summary.non2xx),
        statusText(summary),
      ];
    }),
  );
  const rounds = Math.max(0, ...summaries.map((summary) => summary.rounds));
  const lines = [
    'Per round (measured phase only)',
    perRound,
    '',
    `Median over ${rounds} round${rounds === 1 ? '' : 's'}; ratios are of medians, against the bare transaction`,
    medians,
    '',
    'Ratios of medians',
    ...headlineLines(headline),
  ];
  if (twins.length) {
    lines.push(
      '',
      'Twins: each scenario against one that differs in one thing only (ratios of medians; CPU: difference of medians)',
      table(
        ['what differs', 'req/s ratio', 'per round', 'p99 ratio', 'app µs/req', 'pg µs/req'],
        twins.map((ratio) => [
          ratio.name,
          fixed(ratio.throughput, 2),
          ratio.throughputByRound.map((value) => fixed(value, 2)).join(' '),
          fixed(ratio.p99, 2),
          signed(ratio.appCpuMicros),
          signed(ratio.postgresCpuMicros),
        ]),
      ),
    );
  }
  const bursts = summaries.find((summary) => summary.id === 'bursts');
  if (bursts) lines.push('', burstLine(bursts));
  return lines.join('\n');
}

function headlineLines(headline: HeadlineRatios): string[] {
  const entries: Array<[string, number | undefined]> = [
    ['first execution throughput ÷ bare transaction', headline.firstExecutionThroughput],
    ['first execution p99 ÷ bare transaction', headline.firstExecutionP99],
    ['replay throughput ÷ bare transaction', headline.replayThroughput],
    ['peer first execution throughput ÷ bare transaction', headline.peerFirstExecutionThroughput],
    ['peer first execution p99 ÷ bare transaction', headline.peerFirstExecutionP99],
    ['peer replay throughput ÷ bare transaction', headline.peerReplayThroughput],
    ['first execution throughput ÷ peer first execution', headline.firstExecutionVersusPeer],
    ['replay throughput ÷ peer replay (cache on)', headline.replayVersusPeer],
    ['replay throughput, cache off ÷ peer replay', headline.uncachedReplayVersusPeer],
  ];
  const width = Math.max(...entries.map(([name]) => name.length));
  return entries.map(([name, value]) => `  ${name.padEnd(width)}  ${value === undefined ? 'not measured' : fixed(value, 2)}`);
}

function burstLine(bursts: ScenarioSummary): string {
  const created = bursts.fresh2xx;
  const replayed = bursts.replayed2xx;
  const conflicts = bursts.statusCounts['409'] ?? 0;
  const groups = bursts.burst;
  const overlap = groups && groups.completeGroups > 0
    ? `; groups in flight together: ${groups.overlappingGroups} of ${groups.completeGroups} (${fixed((100 * groups.overlappingGroups) / groups.completeGroups, 0)}%)`
    : '';
  return `Duplicate bursts: 201 first ${created}, 201 replayed ${replayed}, 409 ${conflicts}${overlap}`;
}

function statusText(summary: ScenarioSummary): string {
  return Object.entries(summary.statusCounts)
    .map(([status, count]) => `${status}×${count}`)
    .join(' ');
}

/** CPU µs per request of the app, PostgreSQL and Redis, `-` where not measured. */
function cpuCells(cpu: { app?: number; postgres?: number; redis?: number }): string[] {
  return [cpu.app, cpu.postgres, cpu.redis].map((micros) => fixed(micros ?? NaN, 0));
}

function signed(value: number | undefined): string {
  return value === undefined ? '-' : `${value >= 0 ? '+' : ''}${value.toFixed(0)}`;
}

/** `value` with `digits` decimals, or `-` when it is not a finite number. */
export function fixed(value: number, digits: number): string {
  return Number.isFinite(value) ? value.toFixed(digits) : '-';
}

/** A plain-text table: left-aligned first and last columns, right-aligned numbers between. */
export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((header, column) => Math.max(header.length, ...rows.map((row) => row[column].length)));
  const line = (cells: string[]) => cells.map((cell, column) => (column === 0 || column === cells.length - 1 ? cell.padEnd(widths[column]) : cell.padStart(widths[column]))).join('  ').trimEnd();
  return [line(headers), line(widths.map((width) => '-'.repeat(width))), ...rows.map(line)].join('\n');
}
