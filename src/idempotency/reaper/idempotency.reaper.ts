import { type BeforeApplicationShutdown, Inject, Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { setTimeout as sleep } from 'node:timers/promises';
import { IdempotencyEvents } from '../events/idempotency-events.js';
import { IdempotencyDataSource } from '../transactions/idempotency-data-source.js';
import type { ResolvedModuleOptions } from '../options/idempotency.options.js';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../options/idempotency.tokens.js';
import { ReaperStatements } from '../records/record.statements.js';
import { IdempotencyTables } from '../records/idempotency-tables.js';
import { ReaperSchedule } from './reaper-schedule.js';
import { IdempotencyTransactionHost } from '../transactions/transaction-host.js';

/** What one reaper pass did. */
export interface ReapResult {
  /** Expired records deleted. */
  deleted: number;
  /** Delete statements run, each of at most `batchSize` rows. */
  batches: number;
  /** How long the pass took. */
  elapsedMs: number;
  /** Another instance held the reaper lock, so this one left the pass to it. */
  skipped: boolean;
}

/**
 * Work run after the records in every scheduled pass, within the same time
 * budget: the outbox's cleanup is one. It reads time from the database's
 * clock, as the records' deletion does: no instant is passed in, since the
 * process's clock may be off.
 */
export interface RetentionSweep {
  /** Runs the work, within what is left of the pass's time budget. */
  sweep(timeBudgetMs: number): Promise<unknown>;
}

/**
 * Work run after the sweeps in every scheduled pass, until its deadline:
 * the completer of abandoned phased claims (`IdempotencyPhasesModule`). It
 * stops where `signal` aborts (shutdown), releasing what it holds.
 */
export interface PassCompleter {
  completeAbandoned(bounds: { until: number; signal: AbortSignal }): Promise<unknown>;
}

/**
 * Deletes records past `expires_at`, on a timer cleared at shutdown: in the
 * app's @nestjs/schedule `SchedulerRegistry` as `IDEMPOTENCY_REAPER_INTERVAL`
 * where the app imported `ScheduleModule.forRoot()`, its own otherwise.
 *
 * Deletes run in batches, each its own short transaction, walking the
 * `expires_at` index; rows locked by a live claim are skipped (SKIP LOCKED),
 * and in-progress records are never deleted (a phased one may have side
 * effects: the completer resolves those). Each batch takes a transaction-level
 * advisory lock, so with several instances only one reaps at a time.
 */
@Injectable()
export class IdempotencyReaper implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('IdempotencyReaper');
  private readonly schedule = new ReaperSchedule();
  private pass?: Promise<void>;
  private readonly stopping = new AbortController();
  private readonly sweeps = new Set<RetentionSweep>();
  private readonly completers = new Set<PassCompleter>();

  constructor(
    private readonly served: IdempotencyDataSource,
    private readonly tables: IdempotencyTables,
    private readonly transactions: IdempotencyTransactionHost,
    private readonly events: IdempotencyEvents,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedModuleOptions,
    private readonly moduleRef: ModuleRef,
  ) {}

  /** Starts the scheduled passes: in the app's `SchedulerRegistry` where `ScheduleModule` is imported, on a timer of its own otherwise. */
  async onApplicationBootstrap(): Promise<void> {
    if (!this.options.reaper.enabled) return;
    await this.schedule.start(this.moduleRef, this.options.reaper.intervalMs, () => void this.runPass());
  }

  /**
   * Before the DataSource closes: deletions end after their current batch,
   * the operation a pass is resuming is stopped (and released), and shutdown
   * waits for the pass at most `timeBudgetMs`.
   */
  async beforeApplicationShutdown(): Promise<void> {
    this.stopping.abort(new Error('the application is shutting down'));
    this.schedule.stop();
    await Promise.race([this.pass, sleep(this.options.reaper.timeBudgetMs, undefined, { ref: false })]);
  }

  /** Adds work to every scheduled pass, after the records; returns the function that removes it. */
  addSweep(sweep: RetentionSweep): () => void {
    this.sweeps.add(sweep);
    return () => this.sweeps.delete(sweep);
  }

  /** Joins `completer` to every scheduled pass, after the sweeps; returns how to leave. */
  addCompleter(completer: PassCompleter): () => void {
    this.completers.add(completer);
    return () => this.completers.delete(completer);
  }

  /**
   * One scheduled pass, within `timeBudgetMs`: delete expired records, then
   * run the sweeps (settled outbox events), for up to half of it together;
   * then finish abandoned claims until it is spent (the operation still
   * running then is stopped and released for the next pass); then give
   * record deletions that were cut short whatever time the completer left.
   * The deletion goes first and each step fails on its own, so that a claim
   * the completer cannot handle never keeps expired records in the table,
   * and a slow completer never holds up the deletion. A tick during a pass
   * is skipped.
   */
  runPass(): Promise<void> {
    this.pass ??= (async () => {
      const { timeBudgetMs, batchSize } = this.options.reaper;
      const deadline = Date.now() + timeBudgetMs;
      const reap = (budgetMs: number) => this.reap(undefined, budgetMs).catch((error) => this.logger.error(`Reaper pass failed: ${(error as Error).message}`));
      try {
        const first = await reap(timeBudgetMs / 2);
        for (const sweep of this.sweeps) {
          if (this.stopping.signal.aborted) return;
          const budgetMs = Math.max(0, deadline - timeBudgetMs / 2 - Date.now());
          await sweep.sweep(budgetMs).catch((error) => this.logger.error(`Reaper sweep failed: ${(error as Error).message}`));
        }
        for (const completer of this.completers) {
          if (this.stopping.signal.aborted) return;
          await completer
            .completeAbandoned({ until: deadline, signal: this.stopping.signal })
            .catch((error) => this.logger.error(`Completing abandoned claims failed: ${(error as Error).message}`));
        }
        if (this.stopping.signal.aborted) return;
        const cutShort = first && !first.skipped && first.deleted === first.batches * batchSize;
        if (cutShort && !this.stopping.signal.aborted && Date.now() < deadline) await reap(deadline - Date.now());
      } finally {
        this.pass = undefined;
      }
    })();
    return this.pass;
  }

  /**
   * Deletes finished records that expired by `now`, for up to `budgetMs`
   * (default `timeBudgetMs`), outside any request's transaction. Without
   * `now` (as on the timer), expiry is the database's clock, never this
   * process's: a process clock that runs ahead deletes nothing live.
   */
  reap(now?: Date, budgetMs = this.options.reaper.timeBudgetMs): Promise<ReapResult> {
    return this.transactions.outside(() => this.reapBatches(now, budgetMs));
  }

  private async reapBatches(now: Date | undefined, budgetMs: number): Promise<ReapResult> {
    const { batchSize } = this.options.reaper;
    const started = Date.now();
    const result: ReapResult = { deleted: 0, batches: 0, elapsedMs: 0, skipped: false };
    for (;;) {
      const deleted = await this.deleteBatch(now, batchSize);
      if (deleted === undefined) {
        result.skipped = true;
        break;
      }
      result.deleted += deleted;
      result.batches++;
      if (deleted < batchSize || Date.now() - started >= budgetMs || this.stopping.signal.aborted) break;
    }
    result.elapsedMs = Date.now() - started;
    if (result.deleted > 0) this.events.emit({ kind: 'reaped', deleted: result.deleted, batches: result.batches, elapsedMs: result.elapsedMs });
    return result;
  }

  /** One batch in one transaction; undefined when another instance holds the reaper lock. */
  private deleteBatch(now: Date | undefined, batchSize: number): Promise<number | undefined> {
    return this.served.dataSource.transaction(async (manager) => {
      const statements = this.tables.of(ReaperStatements);
      const lock = statements.lock();
      const [{ locked }] = await manager.query(lock.text, lock.values);
      if (!locked) return undefined;
      const batch = statements.batch(now, batchSize);
      const [{ deleted }] = await manager.query(batch.text, batch.values);
      return deleted;
    });
  }
}
