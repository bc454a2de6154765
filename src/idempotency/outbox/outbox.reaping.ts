import { Inject, Injectable, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { IdempotencyDataSource } from '../transactions/idempotency-data-source.js';
import { IdempotencyEvents } from '../events/idempotency-events.js';
import type { ResolvedModuleOptions } from '../options/idempotency.options.js';
import { IdempotencyReaper, type ReapResult } from '../reaper/idempotency.reaper.js';
import { IdempotencyTables } from '../records/idempotency-tables.js';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../options/idempotency.tokens.js';
import type { ResolvedOutboxOptions } from './outbox.options.js';
import { OUTBOX_REAPER_LOCK, OutboxStatements } from './outbox.store.js';
import { RESOLVED_OUTBOX_OPTIONS } from './outbox.tokens.js';

/**
 * Deletes settled outbox events (sent, or dead letters) once they are older
 * than the retention, as part of every reaper pass: the same batches, TID
 * scans, `SKIP LOCKED`, one-instance advisory lock and time budget as the
 * records. Pending events are never deleted.
 */
@Injectable()
export class OutboxReaping implements OnModuleInit, OnModuleDestroy {
  private unregister?: () => void;

  constructor(
    private readonly served: IdempotencyDataSource,
    private readonly tables: IdempotencyTables,
    private readonly reaper: IdempotencyReaper,
    private readonly events: IdempotencyEvents,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly moduleOptions: ResolvedModuleOptions,
    @Inject(RESOLVED_OUTBOX_OPTIONS) private readonly options: ResolvedOutboxOptions,
  ) {}

  /** Joins the reaper's scheduled pass. */
  onModuleInit(): void {
    this.unregister = this.reaper.addSweep({ sweep: (budget) => this.reap(undefined, budget) });
  }

  /** Leaves the reaper's scheduled pass. */
  onModuleDestroy(): void {
    this.unregister?.();
  }

  /**
   * Deletes events settled more than the retention before `now`, within the
   * time budget. Without `now` (as in the reaper's pass), that is the
   * database's clock, which stamped `settled_at`: a process clock that runs
   * ahead deletes nothing still in retention.
   */
  async reap(now?: Date, timeBudgetMs = this.moduleOptions.reaper.timeBudgetMs): Promise<ReapResult> {
    const retention = this.options.retention ?? this.moduleOptions.retention;
    const { batchSize } = this.moduleOptions.reaper;
    const started = Date.now();
    const result: ReapResult = { deleted: 0, batches: 0, elapsedMs: 0, skipped: false };
    for (;;) {
      const deleted = await this.served.dataSource.transaction(async (manager) => {
        const [{ locked }] = await manager.query(OUTBOX_REAPER_LOCK);
        if (!locked) return undefined;
        const { text, values } = this.tables.of(OutboxStatements).reapBatch(now, retention, batchSize);
        return (await manager.query(text, values))[0].deleted as number;
      });
      if (deleted === undefined) {
        result.skipped = true;
        break;
      }
      result.deleted += deleted;
      result.batches++;
      if (deleted < batchSize || Date.now() - started >= timeBudgetMs) break;
    }
    result.elapsedMs = Date.now() - started;
    if (result.deleted > 0) this.events.emit({ kind: 'outbox_reaped', deleted: result.deleted, batches: result.batches, elapsedMs: result.elapsedMs });
    return result;
  }
}
