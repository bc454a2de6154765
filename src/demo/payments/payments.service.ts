import { Injectable, NotFoundException } from '@nestjs/common';
import { IdempotencyTransactionHost } from '../../idempotency/index.js';
import { Outbox } from '../../idempotency/outbox/index.js';
import { PAYMENT_CAPTURED } from '../orders/order-events.js';
import { Order } from '../orders/order.entity.js';
import { Payment, type PaymentStatus, toPaymentView, type PaymentView } from './payment.entity.js';

export interface NewPayment {
  tenant: string;
  orderId: string;
  amountCents: number;
  currency: string;
}

@Injectable()
export class PaymentsService {
  constructor(
    private readonly tx: IdempotencyTransactionHost,
    private readonly outbox: Outbox,
  ) {}

  /** A pending payment for one of the tenant's orders; 404 for another tenant's. */
  async recordPending(payment: NewPayment): Promise<PaymentView> {
    const manager = this.tx.manager;
    if (!(await manager.existsBy(Order, { id: payment.orderId, tenant: payment.tenant }))) {
      throw new NotFoundException(`Order ${payment.orderId} not found`);
    }
    const saved = await manager.save(manager.create(Payment, { ...payment, status: 'pending' as PaymentStatus }));
    return toPaymentView(saved);
  }

  /** Marks the payment captured and announces it through the outbox, in one transaction. */
  async capture(paymentId: string, chargeId: string): Promise<PaymentView> {
    const manager = this.tx.manager;
    await manager.update(Payment, { id: paymentId }, { status: 'captured', providerChargeId: chargeId, capturedAt: () => 'now()' });
    const payment = toPaymentView(await manager.findOneByOrFail(Payment, { id: paymentId }));
    await this.outbox.add({ type: PAYMENT_CAPTURED, payload: payment, key: payment.orderId });
    return payment;
  }

  async decline(paymentId: string, chargeId: string): Promise<PaymentView> {
    await this.tx.manager.update(Payment, { id: paymentId }, { status: 'declined', providerChargeId: chargeId });
    return toPaymentView(await this.tx.manager.findOneByOrFail(Payment, { id: paymentId }));
  }

  async listForOrder(tenant: string, orderId: string): Promise<PaymentView[]> {
    const payments = await this.tx.manager.find(Payment, { where: { tenant, orderId }, order: { createdAt: 'ASC' } });
    return payments.map(toPaymentView);
  }
}
