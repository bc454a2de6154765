import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { IdempotencyTransactionHost } from '../src/idempotency/index.js';
import type { CreateOrderDto } from '../src/demo/orders/dto/create-order.dto.js';
import type { OrderView } from '../src/demo/orders/order.entity.js';
import { OrdersService } from '../src/demo/orders/orders.service.js';

/** Every bench request acts for this tenant: the bench has no authentication to name one. */
export const BENCH_TENANT = 'bench';

/**
 * The demo's order-plus-outbox write in a transaction of its own, without
 * the idempotency layer: START TRANSACTION, the two inserts, COMMIT. It goes
 * through IdempotencyTransactionHost so that OrdersService runs exactly the code it runs
 * inside an `@Idempotent()` request.
 */
@Injectable()
export class BareOrderTransaction {
  constructor(
    private readonly dataSource: DataSource,
    private readonly transactions: IdempotencyTransactionHost,
    private readonly orders: OrdersService,
  ) {}

  /** Creates the order; no isolation level is passed, so no extra SET TRANSACTION is sent. */
  create(dto: CreateOrderDto): Promise<OrderView> {
    return this.dataSource.transaction((manager) => this.transactions.run(manager, () => this.orders.create(BENCH_TENANT, dto)));
  }
}
