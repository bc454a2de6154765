import { Inject, Injectable } from '@nestjs/common';
import { CurrentOperation } from '../transactions/current-operation.js';
import { hashKey } from '../events/idempotency-events.js';
import { IdempotencyTransactionHost } from '../transactions/transaction-host.js';
import { IdempotencyTables } from '../records/idempotency-tables.js';
import type { ResolvedOutboxOptions } from './outbox.options.js';
import { OutboxStatements } from './outbox.store.js';
import { storableJson, storableText } from './storable-event.js';
import { RESOLVED_OUTBOX_OPTIONS } from './outbox.tokens.js';

/** An event to deliver once the current transaction commits. */
export interface NewOutboxEvent {
  /** What happened, e.g. `order.created`; publishers derive the subject or topic from it. */
  type: string;
  /** JSON-serialisable. */
  payload: unknown;
  /**
   * The ordering key, e.g. the aggregate's id: events with the same key are
   * published one at a time, in commit order. Without one, an event has no
   * order relative to others.
   */
  key?: string;
  /** Headers to publish with the event. */
  headers?: Record<string, string>;
}

/** `outbox.add()` was called outside a transaction: the event could commit without its change. */
export class OutboxOutsideTransactionError extends Error {
  constructor() {
    super(
      'outbox.add() needs a transaction: call it inside an @Idempotent() handler or a phase of a phased operation, ' +
        'or inside your own transaction through IdempotencyTransactionHost.run(manager, () => outbox.add(...)).',
    );
    this.name = 'OutboxOutsideTransactionError';
  }
}

/**
 * Writes events in the current transaction (`IdempotencyTransactionHost.manager`), so
 * an event commits exactly when the change it announces does; the relay
 * delivers it afterwards, at least once.
 *
 * Inside an idempotent operation, an event's id is derived from the
 * operation's record (scope, operation, key, claim time), the phase and the
 * event's index in the transaction: the same event keeps the same id
 * wherever it is published from, and consumers deduplicate on it.
 *
 * @example
 * constructor(private readonly tx: IdempotencyTransactionHost, private readonly outbox: Outbox) {}
 * async create(dto: CreateOrderDto) {
 *   const order = await this.tx.manager.save(Order, dto);
 *   await this.outbox.add({ type: 'order.created', payload: order, key: order.id });
 * }
 */
@Injectable()
export class Outbox {
  constructor(
    private readonly transactions: IdempotencyTransactionHost,
    private readonly tables: IdempotencyTables,
    @Inject(RESOLVED_OUTBOX_OPTIONS) private readonly options: ResolvedOutboxOptions,
  ) {}

  /**
   * Adds an event to the current transaction and returns its id. An event
   * PostgreSQL cannot store (a NUL character, or a lone UTF-16 surrogate, in
   * any string of it) is refused with `OutboxEventUnstorableError` before
   * anything is sent, so the transaction is not aborted by it.
   */
  async add(event: NewOutboxEvent): Promise<string> {
    if (!this.transactions.isTransactional) throw new OutboxOutsideTransactionError();
    const operation = CurrentOperation.get();
    const insert = {
      type: storableText(event.type, 'type'),
      payload: storableJson(event.payload ?? null, 'payload'),
      headers: storableJson(event.headers ?? {}, 'headers'),
      orderingKey: event.key == null ? null : storableText(event.key, 'key'),
      sourceKeyHash: operation ? hashKey(operation.id) : null,
    };
    const manager = this.transactions.manager;
    let rows: Array<{ id: string }>;
    if (operation) {
      const statement = this.tables.of(OutboxStatements).insertForOperation(operation, operation.events++, insert, this.options.notify);
      // On the flow's own transaction it goes named, prepared once per connection; in any other, through the current manager.
      const flow = operation.transaction?.manager === manager ? operation.transaction : undefined;
      rows = flow ? await flow.send(statement) : await manager.query(statement.text, statement.values);
    } else {
      const statement = this.tables.of(OutboxStatements).insert(insert, this.options.notify);
      rows = await manager.query(statement.text, statement.values);
    }
    if (rows.length === 0) {
      throw new Error(`outbox.add() ran in a transaction that cannot see the idempotency record of ${operation?.id.operation}: add events through IdempotencyTransactionHost.manager's transaction.`);
    }
    return rows[0].id;
  }
}
