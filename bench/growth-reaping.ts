import type { BenchAppOptions } from './bench-app.module.js';
import type { GrowthHarness } from './growth-harness.js';
import type { GrowthOptions } from './growth-options.js';
import { FIRST_EXECUTIONS, type ReapingRun } from './growth-results.js';
import { countExpired, seedRecords } from './growth-seeding.js';
import { formatCount, progressLine } from './growth-sizes.js';
import { loadJobFor, problemsOf } from './scenarios.js';

const FIRST_EXECUTION = { id: 'first', ...FIRST_EXECUTIONS };

/**
 * The reaping part, on a database holding `options.backlog` expired records:
 * first executions with the module's defaults, in windows
 * alternating between an app without a reaper (`idle`) and an app whose own
 * IdempotencyReaper runs with a short interval, so that its passes follow
 * each other while the claims run. Each
 * window starts with the full backlog (as many records as the previous
 * reaping window deleted are added, expired in the last hour), gets a fresh
 * app, and counts the expired records just before and just after its measured
 * phase: the difference over the time between the counts is the reaper's
 * rate while the claims ran. Rounds alternate the order (idle first, then
 * reaping first) so drift cancels.
 */
export async function measureReaping(harness: GrowthHarness, url: string, options: GrowthOptions, runId: string, log: (line: string) => void): Promise<ReapingRun[]> {
  const runs: ReapingRun[] = [];
  let topUps = 0;
  for (let round = 1; round <= options.rounds; round++) {
    const variants = round % 2 === 1 ? (['idle', 'reaping'] as const) : (['reaping', 'idle'] as const);
    for (const variant of variants) {
      const missing = options.backlog - (await countExpired(url));
      // Newest expired, as a real backlog grows: the index grows at its edge, and the reaper reaches them last.
      if (missing > 0) await seedRecords([{ url, kind: 'just-expired', count: missing, salt: `${runId}.top-up.${++topUps}` }], log, { vacuum: false });
      const appOptions: BenchAppOptions = { databaseUrl: url, idempotency: { reaper: variant === 'reaping' ? options.reaper : false } };
      const run = await harness.withApps([appOptions], async (apps) => {
        const job = loadJobFor(FIRST_EXECUTION, round, options, `${runId}.${variant}`, apps[0].app.url);
        const warmUp = job.phases.filter((phase) => phase.name !== 'measure');
        const phases = warmUp.length ? await harness.runJob({ ...job, phases: warmUp }, apps) : [];
        const countedBefore = Date.now();
        const backlogBefore = await countExpired(url);
        phases.push(...(await harness.runJob({ ...job, phases: job.phases.filter((phase) => phase.name === 'measure') }, apps)));
        const countedAfter = Date.now();
        const backlogAfter = await countExpired(url);
        const seconds = (countedAfter - countedBefore) / 1000;
        return {
          variant,
          round,
          phases,
          measured: phases[phases.length - 1],
          problems: problemsOf(FIRST_EXECUTION, phases),
          backlogBefore,
          backlogAfter,
          toppedUp: Math.max(0, missing),
          seconds,
          reapedPerSecond: (backlogBefore - backlogAfter) / seconds,
        } satisfies ReapingRun;
      });
      runs.push(run);
      const reaped = `backlog ${formatCount(run.backlogBefore)} → ${formatCount(run.backlogAfter)} (${run.reapedPerSecond.toFixed(0)} rows/s)`;
      log(`${progressLine(`round ${round}/${options.rounds}  ${variant === 'idle' ? 'no reaping' : 'reaping   '}`, run)}  ${reaped}`);
    }
  }
  return runs;
}
