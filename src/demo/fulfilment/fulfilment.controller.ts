import { Controller, UseInterceptors } from '@nestjs/common';
import { EventPattern, Payload } from '@nestjs/microservices';
import { Idempotent } from '../../idempotency/index.js';
import { CrashAfterCommit } from '../messaging/crash-faults.js';
import { ORDER_CREATED } from '../orders/order-events.js';
import type { OrderView } from '../orders/order.entity.js';
import { FulfilmentService } from './fulfilment.service.js';
import type { ShipmentView } from './shipment.entity.js';

/**
 * Ships every created order exactly once: `order.created` arrives at least
 * once (a relay crash re-publishes, a consumer crash before its ack
 * redelivers), and the idempotency record keyed by the event's operation id
 * turns every repeat into a replay.
 */
@Controller()
@UseInterceptors(CrashAfterCommit) // class level: outside @Idempotent(), so it sees the commit
export class FulfilmentController {
  constructor(private readonly fulfilment: FulfilmentService) {}

  @EventPattern(ORDER_CREATED)
  @Idempotent({ messageTenant: (order: OrderView) => order.tenant })
  ship(@Payload() order: OrderView): Promise<ShipmentView> {
    return this.fulfilment.ship(order);
  }
}
