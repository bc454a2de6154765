import { HttpException, HttpStatus } from '@nestjs/common';
import { PhasedOperation, type Phases } from '../../idempotency/phases/index.js';
import type { PaymentView } from './payment.entity.js';
import { PaymentProviderClient } from './payment-provider.client.js';
import { type NewPayment, PaymentsService } from './payments.service.js';

/**
 * Records a pending payment, charges it at the provider under a downstream
 * key derived from the request's key, then captures it with a
 * `payment.captured` outbox event. After a crash anywhere, a retry (or the
 * reaper) resumes at the first unfinished phase, and the provider
 * deduplicates a repeated charge by its key.
 */
@PhasedOperation('capture-payment')
export class CapturePayment implements PhasedOperation<NewPayment, PaymentView> {
  constructor(
    private readonly payments: PaymentsService,
    private readonly provider: PaymentProviderClient,
  ) {}

  async run(input: NewPayment, phases: Phases): Promise<PaymentView> {
    const pending = await phases.local('record-pending', () => this.payments.recordPending(input));
    const charge = await phases.external('charge', (key, signal) =>
      this.provider.charge({ amountCents: input.amountCents, currency: input.currency, reference: pending.id }, key, signal),
    );
    if (charge.status === 'declined') {
      const declined = await phases.local('decline', () => this.payments.decline(pending.id, charge.id));
      throw new HttpException({ code: 'card_declined', message: 'The payment was declined', payment: declined }, HttpStatus.PAYMENT_REQUIRED);
    }
    return phases.local('capture', () => this.payments.capture(pending.id, charge.id));
  }
}
