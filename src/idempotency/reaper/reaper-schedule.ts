import type { ModuleRef } from '@nestjs/core';

/**
 * The name of the reaper's interval in @nestjs/schedule's `SchedulerRegistry`,
 * where the app imported `ScheduleModule.forRoot()`: list it with the app's
 * other jobs, or stop the scheduled passes with `deleteInterval()`.
 *
 * @example
 * schedulerRegistry.deleteInterval(IDEMPOTENCY_REAPER_INTERVAL); // no more scheduled passes
 */
export const IDEMPOTENCY_REAPER_INTERVAL = 'idempotency-reaper';

/** The part of @nestjs/schedule's `SchedulerRegistry` the reaper uses. */
type IntervalRegistry = Pick<import('@nestjs/schedule').SchedulerRegistry, 'addInterval' | 'doesExist' | 'deleteInterval'>;

/**
 * The app's `SchedulerRegistry`, or undefined when @nestjs/schedule is not
 * installed (an optional peer, loaded only here) or the app did not import
 * `ScheduleModule.forRoot()`.
 */
async function schedulerRegistryOf(moduleRef: ModuleRef): Promise<IntervalRegistry | undefined> {
  const schedule = await import('@nestjs/schedule').catch(() => undefined);
  if (!schedule) return undefined;
  try {
    return moduleRef.get(schedule.SchedulerRegistry, { strict: false });
  } catch {
    return undefined;
  }
}

/**
 * A repeating timer for the reaper's passes: the app's `SchedulerRegistry`
 * holds it under `IDEMPOTENCY_REAPER_INTERVAL` where there is one, and it is
 * the reaper's own otherwise. Either way it never keeps the process alive.
 */
export class ReaperSchedule {
  private timer?: NodeJS.Timeout;
  private registry?: IntervalRegistry;

  async start(moduleRef: ModuleRef, intervalMs: number, pass: () => void): Promise<void> {
    this.timer = setInterval(pass, intervalMs);
    this.timer.unref();
    this.registry = await schedulerRegistryOf(moduleRef);
    this.registry?.addInterval(IDEMPOTENCY_REAPER_INTERVAL, this.timer);
  }

  /** Stops the timer, and takes it out of the registry unless the app (or ScheduleModule's shutdown) already did. */
  stop(): void {
    clearInterval(this.timer);
    if (this.registry?.doesExist('interval', IDEMPOTENCY_REAPER_INTERVAL)) this.registry.deleteInterval(IDEMPOTENCY_REAPER_INTERVAL);
  }
}
