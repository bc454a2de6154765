import { BadRequestException, Injectable } from '@nestjs/common';
import { TransactionHost } from '../../idempotency/index.js';
import type { CreateOrderDto } from './dto/create-order.dto.js';
import { Order, toOrderView, type OrderView } from './order.entity.js';
import { OutboxEvent } from './outbox-event.entity.js';

export interface OrderPage {
  items: OrderView[];
  nextCursor: string | null;
}

@Injectable()
export class OrdersService {
  constructor(private readonly tx: TransactionHost) {}

  /** Inserts the order and its `order.created` event: in an idempotent request, inside its transaction. */
  async create(tenant: string, dto: CreateOrderDto): Promise<OrderView> {
    const manager = this.tx.manager;
    const inserted = await manager.insert(Order, { tenant, sku: dto.sku, quantity: dto.quantity, note: dto.note ?? null });
    const { id, createdAt, status } = inserted.generatedMaps[0] as Pick<Order, 'id' | 'createdAt' | 'status'>;
    const order = toOrderView({ id, tenant, sku: dto.sku, quantity: dto.quantity, note: dto.note ?? null, status, createdAt } as Order);
    await manager.insert(OutboxEvent, { tenant, type: 'order.created', aggregateId: id, payload: order });
    return order;
  }

  async findOne(tenant: string, id: string): Promise<OrderView | undefined> {
    const order = await this.tx.manager.findOneBy(Order, { tenant, id });
    return order ? toOrderView(order) : undefined;
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
