import { Injectable } from '@nestjs/common';
import { IdempotencyTransactionHost } from '../../idempotency/index.js';
import type { OrderView } from '../orders/order.entity.js';
import { Shipment, toShipmentView, type ShipmentView } from './shipment.entity.js';

@Injectable()
export class FulfilmentService {
  constructor(private readonly tx: IdempotencyTransactionHost) {}

  /** One shipment for the order: inside an idempotent message handler, in its transaction. */
  async ship(order: OrderView): Promise<ShipmentView> {
    const manager = this.tx.manager;
    const inserted = await manager.insert(Shipment, { orderId: order.id, tenant: order.tenant });
    const { id, createdAt } = inserted.generatedMaps[0] as Pick<Shipment, 'id' | 'createdAt'>;
    return toShipmentView({ id, orderId: order.id, tenant: order.tenant, createdAt } as Shipment);
  }
}
