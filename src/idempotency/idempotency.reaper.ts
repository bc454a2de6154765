import { type BeforeApplicationShutdown, Inject, Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { DataSource } from 'typeorm';
import { IdempotencyEvents } from './events/idempotency-events.js';
import type { ResolvedModuleOptions } from './idempotency.options.js';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from './idempotency.tokens.js';
import { AbandonedClaimsCompleter } from './phases/abandoned-claims.completer.js';

export interface ReapResult {
  deleted: number;
  batches: number;
  elapsedMs: number;
  /** Another instance held the reaper lock, so this one left the pass to it. */
  skipped: boolean;
}

const REAPER_LOCK = `hashtext('idempotency_records:reaper')`;

/**
 * One batch: finished records expired before $1, at most $2 of them, oldest
 * first, skipping rows a live claim holds. `ctid = ANY(ARRAY(...))` keeps the
 * plan a TID scan at any table size, whatever the statistics say.
 */
export const REAP_BATCH = `
  WITH gone AS (
    DELETE FROM idempotency_records
     WHERE ctid = ANY (ARRAY(
       SELECT ctid FROM idempotency_records
        WHERE expires_at <= $1 AND status <> 'in_progress'
        ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED))
    RETURNING 1)
  SELECT count(*)::int AS deleted FROM gone`;

/**
 * Deletes records past `expires_at`, on a timer cleared at shutdown.
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
  private timer?: NodeJS.Timeout;
  private pass?: Promise<void>;
  private readonly stopping = new AbortController();

  constructor(
    private readonly dataSource: DataSource,
    private readonly completer: AbandonedClaimsCompleter,
    private readonly events: IdempotencyEvents,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedModuleOptions,
  ) {}

  onApplicationBootstrap(): void {
    if (!this.options.reaper.enabled) return;
    this.timer = setInterval(() => void this.runPass(), this.options.reaper.intervalMs);
    this.timer.unref();
  }

  /**
   * Before the DataSource closes: the operation a pass is resuming is
   * stopped (and released), deletions end after their current batch, and
   * shutdown waits for the pass at most `timeBudgetMs`.
   */
  async beforeApplicationShutdown(): Promise<void> {
    this.stopping.abort(new Error('the application is shutting down'));
    clearInterval(this.timer);
    await Promise.race([this.pass, sleep(this.options.reaper.timeBudgetMs, undefined, { ref: false })]);
  }

  /**
   * One scheduled pass, within `timeBudgetMs`: abandoned claims are finished
   * for up to half of it, then expired records are deleted for the rest (at
   * least the other half, even when completions fail or overrun). A tick
   * during a pass is skipped.
   */
  runPass(): Promise<void> {
    this.pass ??= (async () => {
      const { timeBudgetMs } = this.options.reaper;
      const started = Date.now();
      try {
        await this.completer.completeAbandoned({ until: started + timeBudgetMs / 2, signal: this.stopping.signal });
      } catch (error) {
        this.logger.error(`Reaper pass could not finish abandoned claims: ${(error as Error).message}`);
      }
      try {
        await this.reap(new Date(), Math.max(timeBudgetMs / 2, started + timeBudgetMs - Date.now()));
      } catch (error) {
        this.logger.error(`Reaper pass failed: ${(error as Error).message}`);
      } finally {
        this.pass = undefined;
      }
    })();
    return this.pass;
  }

  /** Deletes finished records that expired before `now`, for up to `budgetMs` (default `timeBudgetMs`). */
  async reap(now: Date = new Date(), budgetMs = this.options.reaper.timeBudgetMs): Promise<ReapResult> {
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
  private deleteBatch(now: Date, batchSize: number): Promise<number | undefined> {
    return this.dataSource.transaction(async (manager) => {
      const [{ locked }] = await manager.query(`SELECT pg_try_advisory_xact_lock(${REAPER_LOCK}) AS locked`);
      if (!locked) return undefined;
      const [{ deleted }] = await manager.query(REAP_BATCH, [now, batchSize]);
      return deleted;
    });
  }
}
