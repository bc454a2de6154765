import { BadRequestException, Injectable } from '@nestjs/common';
import { IdempotencyTransactionHost } from '../../idempotency/index.js';
import { Outbox } from '../../idempotency/outbox/index.js';
import { Shipment, toShipmentView, type ShipmentView } from '../fulfilment/shipment.entity.js';
import type { CreateOrderDto } from './dto/create-order.dto.js';
import { ORDER_CREATED } from './order-events.js';
import { Order, toOrderView, type OrderView } from './order.entity.js';

/** An order with its shipment, once the fulfilment consumer has shipped it. */
export interface OrderDetail extends OrderView {
  shipment: ShipmentView | null;
}

export interface OrderPage {
  items: OrderView[];
  nextCursor: string | null;
}

@Injectable()
export class OrdersService {
  constructor(
    private readonly tx: IdempotencyTransactionHost,
    private readonly outbox: Outbox,
  ) {}

  /** Inserts the order and its `order.created` outbox event: in an idempotent request, inside its transaction. */
  async create(tenant: string, dto: CreateOrderDto): Promise<OrderView> {
    const manager = this.tx.manager;
    const inserted = await manager.insert(Order, { tenant, sku: dto.sku, quantity: dto.quantity, note: dto.note ?? null });
    const { id, createdAt, status } = inserted.generatedMaps[0] as Pick<Order, 'id' | 'createdAt' | 'status'>;
    const order = toOrderView({ id, tenant, sku: dto.sku, quantity: dto.quantity, note: dto.note ?? null, status, createdAt } as Order);
    await this.outbox.add({ type: ORDER_CREATED, payload: order, key: id });
    return order;
  }

  async findOne(tenant: string, id: string): Promise<OrderDetail | undefined> {
    const order = await this.tx.manager.findOneBy(Order, { tenant, id });
    if (!order) return undefined;
    const shipment = await this.tx.manager.findOneBy(Shipment, { orderId: id });
    return { ...toOrderView(order), shipment: shipment ? toShipmentView(shipment) : null };
  }

  /** Newest first, `limit` at a time; the cursor is the last order's insertion number. */
  async list(tenant: string, limit: number, cursor?: string): Promise<OrderPage> {
    const query = this.tx.manager
      .createQueryBuilder(Order, 'o')
      .addSelect('o.seq')
      .where('o.tenant = :tenant', { tenant })
      .orderBy('o.seq', 'DESC')
      .limit(limit + 1);
    if (cursor !== undefined) query.andWhere('o.seq < :after', { after: decodeCursor(cursor) });
    const rows = await query.getMany();
    const items = rows.slice(0, limit);
    const nextCursor = rows.length > limit ? encodeCursor(items[items.length - 1].seq) : null;
    return { items: items.map(toOrderView), nextCursor };
  }
}

function encodeCursor(seq: string): string {
  return Buffer.from(seq).toString('base64url');
}

function decodeCursor(cursor: string): string {
  const seq = Buffer.from(cursor, 'base64url').toString();
  if (!/^\d{1,18}$/.test(seq)) throw new BadRequestException('cursor is not one this API issued');
  return seq;
}
