import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { createBenchDatabase } from './bench-database.js';
import type { CleanupStack } from '../harness/cleanup-stack.js';
import { renderGrowthChart } from './growth-chart.js';
import { GrowthHarness } from './growth-harness.js';
import type { GrowthOptions } from './growth-options.js';
import { measureReaping } from './growth-reaping.js';
import { formatGrowthReport, type ReapingReport, type SizedTable } from './growth-report.js';
import { GROWTH_APPS, GROWTH_SCENARIOS, summariseReaping, summariseSizes } from './growth-results.js';
import { migrate, seedRecords, type SeedTarget } from './growth-seeding.js';
import { formatCount, measureSizes, type SizedDatabase } from './growth-sizes.js';
import { reaperPlan, tableStats } from './growth-table.js';
import { machineBeforeRun } from './machine-load.js';
import { currentCommit, describeMachine, round2, writeResultFiles } from './results-file.js';

/**
 * One growth run: a database per table size and one for the reaper's
 * backlog, all on one server, seeded in SQL; the size windows interleaved
 * over rounds, then the reaping windows; then the report and
 * `bench/results/<name>.json` and `.svg`. Resolves to the exit code: 1 when
 * any window had a problem.
 */
export async function runGrowthSession(options: GrowthOptions, cleanup: CleanupStack, log: (line: string) => void): Promise<number> {
  const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
  const notes = [
    'Absolute numbers depend on this machine and on whatever else ran on it (see machine.busyBeforeStart and machine.loadAverage*); compare the ratios, which come from one run with interleaved rounds.',
    'Each size has a database of its own on the same server; first executions use random UUID keys, so they land all over the primary key as clients\' keys do.',
  ];
  const before = await machineBeforeRun(log);
  if (before.warning) notes.push(before.warning);
  const database = await createBenchDatabase(runId, log);
  cleanup.add('database', database.close);
  const machine = describeMachine(database.description, before.busyShare);

  const sized: SizedDatabase[] = [];
  for (const size of options.sizes) sized.push({ size, url: sized.length === 0 ? database.url : await database.addDatabase() });
  const backlogUrl = options.backlog > 0 ? await database.addDatabase() : undefined;
  await Promise.all([...sized.map((entry) => entry.url), ...(backlogUrl ? [backlogUrl] : [])].map(migrate));
  const targets: SeedTarget[] = sized.filter((entry) => entry.size > 0).map((entry) => ({ url: entry.url, kind: 'live', count: entry.size, salt: `${runId}.seed` }));
  if (backlogUrl) targets.push({ url: backlogUrl, kind: 'expired', count: options.backlog, salt: `${runId}.backlog` });
  log(`seeding ${targets.map((target) => `${formatCount(target.count)} ${target.kind}`).join(', ')} records`);
  // Checkpoint settings are only changed on a server of the run's own, never on DATABASE_URL's.
  const seedingSeconds = await seedRecords(targets, log, { relaxCheckpoints: database.ownServer });
  log(`seeded and vacuumed in ${seedingSeconds} s`);
  const tablesAtStart = await Promise.all(sized.map((entry) => tableStats(entry.url, true)));

  const harness = new GrowthHarness(cleanup);
  log(machine.line);
  log(`${options.rounds} rounds × ${sized.length} sizes × ${GROWTH_SCENARIOS.length} scenarios, ${options.durationSeconds} s each after ${options.warmupSeconds} s of warm-up, ${options.connections} connections`);
  const sizeRuns = await measureSizes(harness, sized, options, runId, log);
  const tables: SizedTable[] = await Promise.all(sized.map(async (entry, index) => ({ size: entry.size, atStart: tablesAtStart[index], atEnd: await tableStats(entry.url, true) })));

  let reaping: ReapingReport | undefined;
  if (backlogUrl) {
    log(`${options.rounds} rounds × first executions without and with the reaper (every ${options.reaper.intervalMs} ms, batches of ${options.reaper.batchSize}, ${options.reaper.timeBudgetMs} ms a pass), ${formatCount(options.backlog)} expired records`);
    const tableBefore = await tableStats(backlogUrl, true);
    const planBefore = await reaperPlan(backlogUrl, options.reaper.batchSize);
    const runs = await measureReaping(harness, backlogUrl, options, runId, log);
    const tableAfter = await tableStats(backlogUrl, true);
    const planAfter = await reaperPlan(backlogUrl, options.reaper.batchSize);
    reaping = { backlog: options.backlog, runs, summary: summariseReaping(runs), tableBefore, tableAfter, planBefore, planAfter };
    if (reaping.summary.exhaustedRounds.length) notes.push('The backlog ran out during a reaping window: raise --backlog so the reaper never idles while measured.');
  }
  machine.loadAverageAtEnd = loadavg().map(round2);

  const summaries = summariseSizes(options.sizes, sizeRuns);
  console.log(`\n${formatGrowthReport(tables, sizeRuns, summaries, reaping)}\n`);
  console.log(`Machine: ${machine.line}; load average ${machine.loadAverageAtStart.join(' ')} at the start, ${machine.loadAverageAtEnd.join(' ')} at the end.`);

  const svg = await renderGrowthChart(sizeRuns, options.sizes, reaping, machine.line).catch((error: unknown) => {
    notes.push(`The chart could not be drawn: ${String(error)}`);
    return undefined;
  });
  const settings = { ...options, pgPoolSize: Number(process.env.DB_POOL_SIZE ?? 20) };
  // Each scenario with the module options of its app: whether its replays had the cache.
  const scenarios = GROWTH_SCENARIOS.map((scenario) => ({ ...scenario, moduleOptions: GROWTH_APPS[scenario.app] }));
  const results = { generatedAt: new Date().toISOString(), commit: await currentCommit(), settings, scenarios, machine, notes, seedingSeconds, tables, sizes: summaries, reaping, runs: sizeRuns };
  const written = await writeResultFiles(options.resultsName, results, svg);
  log(`wrote ${written.join(', ')}`);
  for (const note of notes) log(`note: ${note}`);

  const problems = [
    ...summaries.flatMap((summary) => summary.problems.map((problem) => `${formatCount(summary.size)} records, ${summary.scenario}, ${problem}`)),
    ...(reaping ? [...reaping.summary.idle.problems.map((problem) => `no reaping, ${problem}`), ...reaping.summary.reaping.problems.map((problem) => `reaping, ${problem}`)] : []),
  ];
  for (const problem of problems) log(`PROBLEM: ${problem}`);
  return problems.length ? 1 : 0;
}
