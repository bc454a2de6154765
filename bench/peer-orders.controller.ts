import { Body, Controller, type DynamicModule, Module, Post, Res } from '@nestjs/common';
import { Idempotent as PeerIdempotent, NodeIdempotencyModule, StorageAdapterEnum } from '@node-idempotency/nestjs';
import { CreateOrderDto } from '../src/demo/orders/dto/create-order.dto.js';
import type { OrderView } from '../src/demo/orders/order.entity.js';
import { BareOrderTransaction } from './bare-order-transaction.js';
import type { HeaderWriter } from './bench-orders.controller.js';
import { BenchOrdersModule } from './bench-orders.controller.js';
import { OutboxRowOrder } from './outbox-row-order.js';

/** Where the peer keeps its keys. */
export interface PeerOptions {
  redisUrl: string;
  /** The peer's cache key prefix: unique per bench run, so runs never replay each other's keys. */
  keyPrefix: string;
}

/** An hour: long enough for any run, short enough that keys a crashed run left behind expire. */
const PEER_KEY_TTL_MS = 60 * 60 * 1000;

/**
 * The bare business transaction behind @node-idempotency/nestjs with its
 * Redis storage: the peer the module is compared with. The peer records the
 * outcome in Redis after the handler's transaction committed, so it is not
 * atomic with the business writes; the bench measures its cost only.
 */
@Controller('bench/peer')
export class PeerOrdersController {
  constructor(
    private readonly bare: BareOrderTransaction,
    private readonly outboxRow: OutboxRowOrder,
  ) {}

  @Post('orders')
  @PeerIdempotent()
  async create(@Body() dto: CreateOrderDto, @Res({ passthrough: true }) response: HeaderWriter): Promise<OrderView> {
    const order = await this.bare.create(dto);
    response.header('Location', `/orders/${order.id}`);
    return order;
  }

  /** The outside harness's handler (an order and an outbox row through `IdempotencyTransactionHost.manager`, in a plain transaction) behind the peer. */
  @Post('outbox-row')
  @PeerIdempotent()
  async createOutboxRow(@Body() dto: CreateOrderDto, @Res({ passthrough: true }) response: HeaderWriter): Promise<OrderView> {
    const order = await this.outboxRow.createBare(dto);
    response.header('Location', `/orders/${order.id}`);
    return order;
  }
}

/** The peer's module and route; imported only when a Redis server answers. */
@Module({})
export class PeerOrdersModule {
  static forRoot(options: PeerOptions): DynamicModule {
    return {
      module: PeerOrdersModule,
      imports: [
        NodeIdempotencyModule.forRootAsync({
          storage: { adapter: StorageAdapterEnum.redis, options: { url: options.redisUrl } },
          cacheKeyPrefix: options.keyPrefix,
          cacheTTLMS: PEER_KEY_TTL_MS,
        }),
        BenchOrdersModule,
      ],
      controllers: [PeerOrdersController],
    };
  }
}
