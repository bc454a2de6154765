import { Body, Controller, Module, Post, Res, UseInterceptors, type CallHandler, type ExecutionContext, type NestInterceptor } from '@nestjs/common';
import type { Observable } from 'rxjs';
import { Idempotent } from '../src/idempotency/index.js';
import { CreateOrderDto } from '../src/demo/orders/dto/create-order.dto.js';
import type { OrderView } from '../src/demo/orders/order.entity.js';
import { OrdersService } from '../src/demo/orders/orders.service.js';
import { BareOrderTransaction, BENCH_TENANT } from './bare-order-transaction.js';
import { OutboxRowOrder } from './outbox-row-order.js';
import { TwoRowOrder } from './two-row-order.js';

/** Express and Fastify responses both set headers this way. */
export interface HeaderWriter {
  header(name: string, value: string): unknown;
}

/**
 * An interceptor that only passes the call on: what Nest charges any route
 * for having one (its Observable chain and client-disconnect tracking),
 * whatever the interceptor does. Ours and the peer's both pay it.
 */
class PassThroughInterceptor implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle();
  }
}

/**
 * The bench's own routes, never part of the demo app. Each takes the demo's
 * order body through the same ValidationPipe and, where it writes, answers
 * like the demo's `POST /orders` (201, the order, `Location`).
 */
@Controller('bench')
export class BenchOrdersController {
  constructor(
    private readonly orders: OrdersService,
    private readonly bare: BareOrderTransaction,
    private readonly twoRows: TwoRowOrder,
    private readonly outboxRow: OutboxRowOrder,
  ) {}

  /** The framework floor: routing, body parsing and validation, no database. */
  @Post('floor')
  floor(@Body() dto: CreateOrderDto): { sku: string; quantity: number } {
    return { sku: dto.sku, quantity: dto.quantity };
  }

  /** The business transaction alone: what the idempotency layer is compared with. */
  @Post('orders/bare')
  async createBare(@Body() dto: CreateOrderDto, @Res({ passthrough: true }) response: HeaderWriter): Promise<OrderView> {
    const order = await this.bare.create(dto);
    response.header('Location', `/orders/${order.id}`);
    return order;
  }

  /** The bare transaction behind a pass-through interceptor: the share of an interceptor-based layer's cost that is Nest's. */
  @Post('orders/intercepted')
  @UseInterceptors(PassThroughInterceptor)
  createIntercepted(@Body() dto: CreateOrderDto, @Res({ passthrough: true }) response: HeaderWriter): Promise<OrderView> {
    return this.createBare(dto, response);
  }

  /** The demo's `POST /orders` handler: the claim, the order, its outbox event and the outcome in one transaction. */
  @Post('orders/idempotent')
  @Idempotent()
  createIdempotent(@Body() dto: CreateOrderDto, @Res({ passthrough: true }) response: HeaderWriter): Promise<OrderView> {
    return this.createOrder(dto, response);
  }

  /**
   * The same work on a route of its own (another operation): a lock on the
   * key's hash and a read open the transaction, the record's INSERT goes with
   * COMMIT. Against `orders/idempotent`, the paired run's same-work pair.
   */
  @Post('orders/claim-first')
  @Idempotent()
  createClaimedFirst(@Body() dto: CreateOrderDto, @Res({ passthrough: true }) response: HeaderWriter): Promise<OrderView> {
    return this.createOrder(dto, response);
  }

  /** Two inserts through `IdempotencyTransactionHost.manager` in a plain `dataSource.transaction()`: the base of the next route. */
  @Post('two-rows/bare')
  async createTwoRowsBare(@Body() dto: CreateOrderDto, @Res({ passthrough: true }) response: HeaderWriter): Promise<OrderView> {
    const order = await this.twoRows.createBare(dto);
    response.header('Location', `/orders/${order.id}`);
    return order;
  }

  /** The module's default around the same two inserts, each a unit of the request's transaction with a savepoint of its own. */
  @Post('two-rows/idempotent')
  @Idempotent()
  async createTwoRows(@Body() dto: CreateOrderDto, @Res({ passthrough: true }) response: HeaderWriter): Promise<OrderView> {
    const order = await this.twoRows.create(dto);
    response.header('Location', `/orders/${order.id}`);
    return order;
  }

  /** The outside harness's handler without the module: an order and an outbox row, two `insert()`s through `IdempotencyTransactionHost.manager` in a plain `dataSource.transaction()`. */
  @Post('outbox-row/bare')
  async createOutboxRowBare(@Body() dto: CreateOrderDto, @Res({ passthrough: true }) response: HeaderWriter): Promise<OrderView> {
    const order = await this.outboxRow.createBare(dto);
    response.header('Location', `/orders/${order.id}`);
    return order;
  }

  /** The same two inserts behind the module's default. */
  @Post('outbox-row/idempotent')
  @Idempotent()
  async createOutboxRow(@Body() dto: CreateOrderDto, @Res({ passthrough: true }) response: HeaderWriter): Promise<OrderView> {
    const order = await this.outboxRow.create(dto);
    response.header('Location', `/orders/${order.id}`);
    return order;
  }

  // Another `@Idempotent({ … })` route variant is one more handler like these (see bench/README.md).

  /** What every `@Idempotent()` route of the bench runs: the demo's order write, answered like `POST /orders`. */
  private async createOrder(dto: CreateOrderDto, response: HeaderWriter): Promise<OrderView> {
    const order = await this.orders.create(BENCH_TENANT, dto);
    response.header('Location', `/orders/${order.id}`);
    return order;
  }
}

/** The bench routes and the demo's OrdersService they drive. */
@Module({
  controllers: [BenchOrdersController],
  providers: [OrdersService, BareOrderTransaction, TwoRowOrder, OutboxRowOrder],
  exports: [BareOrderTransaction, OutboxRowOrder],
})
export class BenchOrdersModule {}
