import type { GrowthHarness } from './growth-harness.js';
import type { GrowthOptions } from './growth-options.js';
import { GROWTH_APPS, GROWTH_SCENARIOS, type MeasuredRun, type SizeRun } from './growth-results.js';
import { loadJobFor, problemsOf } from './scenarios.js';
import { fixed } from './report-table.js';

/** One table size: its own database, seeded before measuring. */
export interface SizedDatabase {
  size: number;
  url: string;
}

/**
 * The table-growth part: in every round, for every size, a window with fresh
 * bench apps on that size's database (the module's defaults, and without
 * the replay cache), in which first executions, replays through the cache
 * and replays from the table run one after the other. Sizes run in
 * ascending order in odd rounds and descending in even ones, and so do the
 * scenarios within a window, so that drift on the machine over the run
 * (other work, the checkpointer, autovacuum) favours neither end.
 * The reaper is off: nothing in these tables is expired.
 */
export async function measureSizes(harness: GrowthHarness, databases: readonly SizedDatabase[], options: GrowthOptions, runId: string, log: (line: string) => void): Promise<SizeRun[]> {
  const runs: SizeRun[] = [];
  const appNames = Object.keys(GROWTH_APPS) as Array<keyof typeof GROWTH_APPS>;
  for (let round = 1; round <= options.rounds; round++) {
    const ascending = round % 2 === 1;
    for (const database of ascending ? databases : [...databases].reverse()) {
      const appOptions = appNames.map((name) => ({ databaseUrl: database.url, idempotency: { ...GROWTH_APPS[name], reaper: false as const } }));
      await harness.withApps(appOptions, async (apps) => {
        for (const scenario of ascending ? GROWTH_SCENARIOS : [...GROWTH_SCENARIOS].reverse()) {
          const app = apps[appNames.indexOf(scenario.app)];
          // Each size has a database of its own, so the same key prefixes never meet.
          const job = loadJobFor(scenario, round, options, runId, app.app.url);
          const phases = await harness.runJob(job, apps);
          const run: SizeRun = { size: database.size, scenario: scenario.id, round, phases, measured: phases[phases.length - 1], problems: problemsOf(scenario, phases) };
          runs.push(run);
          log(progressLine(`round ${round}/${options.rounds}  ${formatCount(database.size).padStart(5)} records  ${scenario.label.padEnd(24)}`, run));
        }
      });
    }
  }
  return runs;
}

/** The measured numbers of one run, for the progress log. */
export function progressLine(prefix: string, run: MeasuredRun): string {
  const { requestsPerSecond, latencyMs, non2xx } = run.measured;
  const numbers = `${requestsPerSecond.toFixed(0).padStart(6)} req/s  p50 ${fixed(latencyMs.p50, 1).padStart(6)} ms  p99 ${fixed(latencyMs.p99, 1).padStart(6)} ms  non-2xx ${non2xx}`;
  return `${prefix} ${numbers}${run.problems.length ? `  PROBLEM: ${run.problems.join('; ')}` : ''}`;
}

/** 0, 10k, 1M, 10M, 2.5M: short labels for record counts. */
export function formatCount(count: number): string {
  if (count >= 1e6) return `${+(count / 1e6).toFixed(2)}M`;
  if (count >= 1e3) return `${+(count / 1e3).toFixed(2)}k`;
  return String(count);
}
