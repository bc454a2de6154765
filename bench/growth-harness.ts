import type { BenchAppOptions } from './bench-app.module.js';
import { type BenchAppProcess, type LoadGeneratorProcess, startBenchApp, startLoadGenerator } from './child-processes.js';
import type { CleanupStack } from '../harness/cleanup-stack.js';
import type { LoadJob, PhaseResult } from './load-protocol.js';

/** Slack on top of a job's own duration before the runner gives up on the load generator. */
const JOB_SLACK_MS = 120_000;

/** A bench app of the current window, and a promise that rejects if it exits before it is stopped. */
export interface WindowApp {
  app: BenchAppProcess;
  died: Promise<never>;
}

/**
 * The child processes of a growth run: one load generator for the whole run,
 * and bench apps started per measuring window, each with the module options
 * the window needs (a reaper or none, a replay cache or none). Every process
 * still running is stopped by the cleanup stack, however the run ends.
 */
export class GrowthHarness {
  private readonly load: LoadGeneratorProcess;
  private readonly live = new Set<BenchAppProcess>();

  constructor(cleanup: CleanupStack) {
    this.load = startLoadGenerator();
    cleanup.add('load generator', () => this.load.process.stop());
    cleanup.add('bench apps', () => Promise.all([...this.live].map((app) => app.process.stop())));
  }

  /** Starts one app per options (in parallel), runs `work` with them, then stops them, also when `work` fails. */
  async withApps<T>(optionsList: readonly BenchAppOptions[], work: (apps: WindowApp[]) => Promise<T>): Promise<T> {
    const started = await Promise.allSettled(optionsList.map((options) => startBenchApp(options)));
    const apps = started.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
    for (const app of apps) this.live.add(app);
    try {
      const failed = started.find((result) => result.status === 'rejected');
      if (failed) throw failed.reason;
      return await work(apps.map((app) => ({ app, died: diedPromise(app) })));
    } finally {
      await Promise.all(apps.map((app) => app.process.stop()));
      for (const app of apps) this.live.delete(app);
    }
  }

  /** Runs one job on the load generator; rejects as soon as one of `apps` exits. */
  runJob(job: LoadJob, apps: readonly WindowApp[]): Promise<PhaseResult[]> {
    const seconds = job.phases.reduce((sum, phase) => sum + (phase.durationSeconds ?? 0), 0);
    return Promise.race([this.load.run(job, seconds * 1000 + JOB_SLACK_MS), ...apps.map((app) => app.died)]);
  }
}

function diedPromise(app: BenchAppProcess): Promise<never> {
  const died = app.process.ended.then((end) => Promise.reject(new Error(`a bench app exited (code ${end.code}) during its window`)));
  // Stopping the app at the end of its window settles this too; only a race observes it.
  died.catch(() => undefined);
  return died;
}
