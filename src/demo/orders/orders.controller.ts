import { Body, Controller, Get, NotFoundException, Param, ParseUUIDPipe, Post, Query, Res } from '@nestjs/common';
import { Tenant } from '../auth/tenant.decorator.js';
import { Idempotent } from '../../idempotency/index.js';
import { CreateOrderDto } from './dto/create-order.dto.js';
import { ListOrdersQuery } from './dto/list-orders.query.js';
import { OrderExecutionLog } from './order-execution-log.js';
import type { OrderView } from './order.entity.js';
import { type OrderDetail, OrdersService, type OrderPage } from './orders.service.js';

/** Express and Fastify responses both set headers this way. */
interface HeaderWriter {
  header(name: string, value: string): unknown;
}

@Controller('orders')
export class OrdersController {
  constructor(
    private readonly orders: OrdersService,
    private readonly executions: OrderExecutionLog,
  ) {}

  @Post()
  @Idempotent()
  async create(@Tenant() tenant: string, @Body() dto: CreateOrderDto, @Res({ passthrough: true }) response: HeaderWriter): Promise<OrderView> {
    await this.executions.record(tenant, dto.sku);
    const order = await this.orders.create(tenant, dto);
    response.header('Location', `/orders/${order.id}`);
    return order;
  }

  @Get()
  list(@Tenant() tenant: string, @Query() query: ListOrdersQuery): Promise<OrderPage> {
    return this.orders.list(tenant, query.limit, query.cursor);
  }

  @Get(':id')
  async findOne(@Tenant() tenant: string, @Param('id', ParseUUIDPipe) id: string): Promise<OrderDetail> {
    const order = await this.orders.findOne(tenant, id);
    if (!order) throw new NotFoundException(`Order ${id} not found`);
    return order;
  }
}
