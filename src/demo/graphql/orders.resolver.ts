import { NotFoundException, ParseUUIDPipe } from '@nestjs/common';
import { Args, ID, Int, Mutation, Query, Resolver } from '@nestjs/graphql';
import { Idempotent } from '../../idempotency/index.js';
import { Tenant } from '../auth/tenant.decorator.js';
import { OrderExecutionLog } from '../orders/order-execution-log.js';
import type { OrderView } from '../orders/order.entity.js';
import { OrdersService } from '../orders/orders.service.js';
import { CreateOrderInput, OrderModel } from './order.model.js';

/** The demo's orders over GraphQL, beside `/orders`: the same service, the same idempotency. */
@Resolver(() => OrderModel)
export class OrdersResolver {
  constructor(
    private readonly service: OrdersService,
    private readonly executions: OrderExecutionLog,
  ) {}

  /** One record per key: `graphql Mutation.createOrder`, fingerprinted by `input`. */
  @Mutation(() => OrderModel)
  @Idempotent()
  async createOrder(
    @Tenant() tenant: string,
    @Args('input') input: CreateOrderInput,
    // Read by @Idempotent(); declared so that the schema has it.
    @Args('idempotencyKey', { type: () => String, nullable: true, description: 'The key of this operation; else the Idempotency-Key header.' }) _key?: string,
  ): Promise<OrderView> {
    await this.executions.record(tenant, input.sku);
    return this.service.create(tenant, input);
  }

  /** Queries are never protected: they read. */
  @Query(() => [OrderModel])
  async orders(@Tenant() tenant: string, @Args('limit', { type: () => Int, defaultValue: 20 }) limit: number): Promise<OrderView[]> {
    return (await this.service.list(tenant, Math.min(Math.max(limit, 1), 100))).items;
  }

  @Query(() => OrderModel)
  async order(@Tenant() tenant: string, @Args('id', { type: () => ID }, ParseUUIDPipe) id: string): Promise<OrderView> {
    const order = await this.service.findOne(tenant, id);
    if (!order) throw new NotFoundException(`Order ${id} not found`);
    return order;
  }
}
