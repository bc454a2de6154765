import { type BeforeApplicationShutdown, Inject, Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import type { QueryRunner } from 'typeorm';
import { IdempotencyDataSource } from '../transactions/idempotency-data-source.js';
import { IdempotencyEvents } from '../events/idempotency-events.js';
import { IdempotencyTables } from '../records/idempotency-tables.js';
import type { RelayBatchResult } from '../events/idempotency-event.types.js';
import type { OutboxMessage } from './outbox-publisher.js';
import { OutboxPublisherUnavailableError } from './outbox-publisher.js';
import type { ResolvedOutboxOptions } from './outbox.options.js';
import { type OutboxRow, type OutboxStatement, OutboxStatements } from './outbox.store.js';
import { RESOLVED_OUTBOX_OPTIONS } from './outbox.tokens.js';
import { OutboxWakeup } from './outbox-wakeup.js';
import { ownQueryRunner } from '../transactions/transaction-join.js';

/** Pending events and the age of the oldest, for the lag gauges. */
export interface OutboxStats {
  pending: number;
  oldestPendingAgeSeconds: number;
}

const BLOCKED_RETRY_MS = 50;

/**
 * Delivers committed outbox events through the publisher, in the background.
 *
 * Each batch is one transaction: it claims due events with `FOR UPDATE SKIP
 * LOCKED` (so several relays never publish the same event at once), publishes
 * them, waiting for each broker ack, and marks them sent in the same
 * transaction. A relay that dies before its commit leaves the events
 * pending, and they are published again under the same message id: delivery
 * is at least once. Events of one ordering key go one at a time, in `seq`
 * (commit) order, and never overtake an older event of their key that
 * another relay holds or that waits out a backoff. A failed publish backs off
 * exponentially; after `maxAttempts` the event becomes a dead letter and
 * stops blocking its key.
 */
@Injectable()
export class OutboxRelay implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('OutboxRelay');
  private wakeup?: OutboxWakeup;
  private loop?: Promise<void>;
  private stopping = false;
  private unavailableSince?: number;

  constructor(
    private readonly served: IdempotencyDataSource,
    private readonly tables: IdempotencyTables,
    private readonly events: IdempotencyEvents,
    @Inject(RESOLVED_OUTBOX_OPTIONS) private readonly options: ResolvedOutboxOptions,
  ) {}

  private get statements(): OutboxStatements {
    return this.tables.of(OutboxStatements);
  }

  /** Whether this instance delivers events (it has a publisher and the relay is on). */
  get running(): boolean {
    return this.loop !== undefined;
  }

  /** Starts relaying, when this instance has a publisher and the relay is on. */
  onApplicationBootstrap(): void {
    if (!this.options.relay.enabled) return;
    this.wakeup = new OutboxWakeup(this.served.dataSource, this.options.notify);
    this.loop = this.run(this.wakeup);
  }

  /** The batch in flight finishes (publishes acked, marks committed); then the relay stops and closes its publisher. */
  async beforeApplicationShutdown(): Promise<void> {
    this.stopping = true;
    this.wakeup?.wake();
    await this.loop;
    await this.wakeup?.close();
    await this.options.publisher?.close?.();
  }

  /** Pending events and the oldest one's age. */
  async stats(): Promise<OutboxStats> {
    const { text, values } = this.statements.stats();
    const [row] = await this.served.dataSource.query(text, values);
    return { pending: row.pending, oldestPendingAgeSeconds: row.oldest_age_seconds };
  }

  /** Puts dead letters back in line with their attempts reset: those named, or all. Returns how many. */
  async requeueDead(ids?: string[]): Promise<number> {
    const { text, values } = this.statements.requeueDead(ids);
    const [, affected] = await this.served.dataSource.query(text, values);
    this.wakeup?.wake();
    return affected;
  }

  private async run(wakeup: OutboxWakeup): Promise<void> {
    const { batchSize, pollIntervalMs, unavailablePauseMs } = this.options.relay;
    while (!this.stopping) {
      let result: RelayBatchResult;
      try {
        result = await this.relayBatch();
      } catch (error) {
        this.logger.error(`batch failed, retrying in ${pollIntervalMs} ms: ${(error as Error).message}`);
        await wakeup.wait(pollIntervalMs);
        continue;
      }
      if (result.unavailable) await wakeup.wait(unavailablePauseMs);
      else if (result.claimed === batchSize && result.published + result.failed > 0) continue;
      else await wakeup.wait(result.blocked > 0 ? Math.min(BLOCKED_RETRY_MS, pollIntervalMs) : pollIntervalMs);
    }
  }

  /** Claims, publishes and marks one batch, in one transaction. */
  async relayBatch(): Promise<RelayBatchResult> {
    const publisher = this.options.publisher;
    if (!publisher) throw new Error('The outbox relay has no publisher: pass one to IdempotencyOutboxModule.forRoot({ publisher }).');
    const started = Date.now();
    const runner = ownQueryRunner(this.served.dataSource);
    try {
      await runner.connect();
      await runner.startTransaction('READ COMMITTED');
      const rows: OutboxRow[] = await query(runner, this.statements.claimBatch(this.options.relay.batchSize));
      const lines = await this.publishable(runner, rows);
      const result: RelayBatchResult = { claimed: rows.length, published: 0, failed: 0, dead: 0, blocked: rows.length - lines.flat().length, unavailable: false };
      const sent: string[] = [];
      const failed: Array<{ id: string; error: string }> = [];
      await Promise.all(
        lines.map(async (line) => {
          for (const row of line) {
            if (result.unavailable || this.stopping) return;
            try {
              await publisher.publish(toMessage(row));
              sent.push(row.id);
            } catch (error) {
              if (error instanceof OutboxPublisherUnavailableError) result.unavailable = true;
              else failed.push({ id: row.id, error: (error as Error).message ?? String(error) });
              return; // the key's later events wait for this one
            }
          }
        }),
      );
      if (sent.length > 0) await query(runner, this.statements.markSent(sent));
      const settled = failed.length > 0 ? await query<{ id: string; type: string; status: string; attempts: number }>(runner, this.markFailed(failed)) : [];
      await runner.commitTransaction();
      result.published = sent.length;
      result.failed = failed.length;
      for (const row of settled.filter((row) => row.status === 'dead')) {
        result.dead++;
        const error = failed.find((failure) => failure.id === row.id)!.error;
        this.events.emit({ kind: 'outbox_dead_letter', eventId: row.id, type: row.type, attempts: row.attempts, error });
      }
      this.noteAvailability(result.unavailable);
      if (rows.length > 0) this.events.emit({ kind: 'outbox_relayed', ...result, elapsedMs: Date.now() - started });
      return result;
    } catch (error) {
      if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
      throw error;
    } finally {
      await runner.release();
    }
  }

  /**
   * The claimed events that may go now, in lines: one line per ordering key
   * (its events in `seq` order, cut before the oldest event of the key this
   * batch does not hold), and one line per event without a key.
   */
  private async publishable(runner: QueryRunner, rows: OutboxRow[]): Promise<OutboxRow[][]> {
    const keys = [...new Set(rows.map((row) => row.ordering_key).filter((key): key is string => key !== null))];
    const blockers = new Map<string, bigint>();
    if (keys.length > 0) {
      const found = await query<{ ordering_key: string; seq: string }>(runner, this.statements.blockers(keys, rows.map((row) => row.id)));
      for (const { ordering_key, seq } of found) blockers.set(ordering_key, BigInt(seq));
    }
    const lines = new Map<string, OutboxRow[]>();
    const loose: OutboxRow[][] = [];
    for (const row of rows) {
      if (row.ordering_key === null) {
        loose.push([row]);
        continue;
      }
      const blocker = blockers.get(row.ordering_key);
      if (blocker !== undefined && BigInt(row.seq) > blocker) continue;
      const line = lines.get(row.ordering_key) ?? [];
      line.push(row);
      lines.set(row.ordering_key, line);
    }
    return [...lines.values(), ...loose];
  }

  private markFailed(failed: Array<{ id: string; error: string }>): OutboxStatement {
    const { maxAttempts, backoff } = this.options.relay;
    return this.statements.markFailed(
      failed.map((failure) => failure.id),
      failed.map((failure) => failure.error.slice(0, 1000)),
      maxAttempts,
      backoff,
    );
  }

  /** One warning when the broker becomes unreachable, one line when it is back. */
  private noteAvailability(unavailable: boolean): void {
    if (unavailable && this.unavailableSince === undefined) {
      this.unavailableSince = Date.now();
      this.logger.warn(`the broker is unreachable: delivery paused, retrying every ${this.options.relay.unavailablePauseMs} ms`);
      this.events.emit({ kind: 'outbox_unavailable' });
    } else if (!unavailable && this.unavailableSince !== undefined) {
      this.logger.log(`the broker is reachable again after ${Date.now() - this.unavailableSince} ms: delivery resumed`);
      this.unavailableSince = undefined;
    }
  }
}

/** Rows of any statement (TypeORM answers UPDATE with `[rows, count]` unless asked for a structured result). */
async function query<Row = OutboxRow>(runner: QueryRunner, statement: OutboxStatement): Promise<Row[]> {
  const result = await runner.query(statement.text, statement.values, true);
  return result.records as Row[];
}

function toMessage(row: OutboxRow): OutboxMessage {
  return {
    id: row.id,
    type: row.type,
    payload: row.payload,
    headers: row.headers,
    orderingKey: row.ordering_key,
    sourceKeyHash: row.source_key_hash,
    attempts: row.attempts,
    createdAt: row.created_at,
  };
}
