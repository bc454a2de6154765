import { Injectable } from '@nestjs/common';
import { Column, CreateDateColumn, DataSource, Entity, type MigrationInterface, PrimaryGeneratedColumn, type QueryRunner } from 'typeorm';
import { IdempotencyTransactionHost } from '../src/idempotency/index.js';
import type { CreateOrderDto } from '../src/demo/orders/dto/create-order.dto.js';
import { ORDER_CREATED } from '../src/demo/orders/order-events.js';
import type { OrderView } from '../src/demo/orders/order.entity.js';
import { BENCH_TENANT } from './bare-order-transaction.js';
import { insertOrder } from './two-row-order.js';

/**
 * An app's own outbox row, bench-only: the shape of the demo's former
 * `outbox_events` table (dropped when the demo moved to the package's
 * outbox), written with a plain `insert()` like any other entity. No relay
 * reads it.
 */
@Entity({ name: 'bench_outbox_events' })
export class BenchOutboxEvent {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column('text')
  tenant: string;

  @Column('text', { name: 'event_type' })
  eventType: string;

  @Column('uuid', { name: 'aggregate_id' })
  aggregateId: string;

  @Column('jsonb')
  payload: unknown;

  @CreateDateColumn({ type: 'timestamptz', name: 'created_at' })
  createdAt: Date;
}

/** The bench app's own table, after the demo's: the bench app's DataSource runs it with theirs. */
export class CreateBenchOutboxEvents1764400099000 implements MigrationInterface {
  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE bench_outbox_events (
        id           uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
        tenant       text        NOT NULL,
        event_type   text        NOT NULL,
        aggregate_id uuid        NOT NULL,
        payload      jsonb       NOT NULL,
        created_at   timestamptz NOT NULL DEFAULT clock_timestamp()
      )`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE bench_outbox_events`);
  }
}

/**
 * The handler the outside harness measured: an order and an outbox row,
 * two `insert()`s through `IdempotencyTransactionHost.manager`, no module API between
 * them (the demo's order write adds its event with `Outbox.add()`, a
 * statement of the module's). Inside an `@Idempotent()` request each insert
 * is a unit of the request's transaction.
 */
@Injectable()
export class OutboxRowOrder {
  constructor(
    private readonly dataSource: DataSource,
    private readonly transactions: IdempotencyTransactionHost,
  ) {}

  /** The two inserts in the current transaction: the request's inside an `@Idempotent()` route. */
  async create(dto: CreateOrderDto): Promise<OrderView> {
    const manager = this.transactions.manager;
    const order = await insertOrder(manager, dto);
    await manager.insert(BenchOutboxEvent, { tenant: BENCH_TENANT, eventType: ORDER_CREATED, aggregateId: order.id, payload: order });
    return order;
  }

  /** The same two inserts in a plain `dataSource.transaction()`, also through `IdempotencyTransactionHost.manager`: START TRANSACTION, the order, the row, COMMIT. */
  createBare(dto: CreateOrderDto): Promise<OrderView> {
    return this.dataSource.transaction((manager) => this.transactions.run(manager, () => this.create(dto)));
  }
}
