import { Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import { IdempotencyTransactionHost } from '../src/idempotency/index.js';
import type { CreateOrderDto } from '../src/demo/orders/dto/create-order.dto.js';
import { Shipment } from '../src/demo/fulfilment/shipment.entity.js';
import { Order, toOrderView, type OrderView } from '../src/demo/orders/order.entity.js';
import { BENCH_TENANT } from './bare-order-transaction.js';

/**
 * The shape most handlers have: two rows, each written on its own through
 * `IdempotencyTransactionHost.manager` (the order, then a row that refers to it, here
 * its shipment), with no module API in between. Inside an `@Idempotent()`
 * request each insert is a unit of the request's transaction, behind a
 * savepoint of its own; the demo's order write instead adds its second row
 * with `Outbox.add()`, a statement of the module's.
 */
@Injectable()
export class TwoRowOrder {
  constructor(
    private readonly dataSource: DataSource,
    private readonly transactions: IdempotencyTransactionHost,
  ) {}

  /** The two inserts in the current transaction: the request's inside an `@Idempotent()` route. */
  async create(dto: CreateOrderDto): Promise<OrderView> {
    const manager = this.transactions.manager;
    const order = await insertOrder(manager, dto);
    await manager.insert(Shipment, { orderId: order.id, tenant: BENCH_TENANT });
    return order;
  }

  /** The same two inserts in a plain `dataSource.transaction()`: START TRANSACTION, the order, the shipment, COMMIT. */
  createBare(dto: CreateOrderDto): Promise<OrderView> {
    return this.dataSource.transaction((manager) => this.transactions.run(manager, () => this.create(dto)));
  }
}

/** The order of the bench's two-insert handlers, inserted through `manager`, as its view. */
export async function insertOrder(manager: EntityManager, dto: CreateOrderDto): Promise<OrderView> {
  const inserted = await manager.insert(Order, { tenant: BENCH_TENANT, sku: dto.sku, quantity: dto.quantity, note: dto.note ?? null });
  const { id, createdAt, status } = inserted.generatedMaps[0] as Pick<Order, 'id' | 'createdAt' | 'status'>;
  return toOrderView({ id, tenant: BENCH_TENANT, sku: dto.sku, quantity: dto.quantity, note: dto.note ?? null, status, createdAt } as Order);
}
