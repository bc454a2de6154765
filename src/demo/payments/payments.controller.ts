import { Body, Controller, Get, Param, ParseUUIDPipe, Post } from '@nestjs/common';
import { Tenant } from '../auth/tenant.decorator.js';
import { Idempotent } from '../../idempotency/index.js';
import { PhasedClaim } from '../../idempotency/phases/index.js';
import { CapturePayment } from './capture-payment.operation.js';
import { CreatePaymentDto } from './dto/create-payment.dto.js';
import type { PaymentView } from './payment.entity.js';
import { PaymentsService } from './payments.service.js';

@Controller('orders/:id/payments')
export class PaymentsController {
  constructor(private readonly payments: PaymentsService) {}

  /** Charges the order. A decline (402) and an unknown order (404) are final and replay. */
  @Post()
  @Idempotent({ phases: true, storeErrors: [402, 404] })
  pay(
    @Tenant() tenant: string,
    @Param('id', ParseUUIDPipe) orderId: string,
    @Body() dto: CreatePaymentDto,
    @PhasedClaim() claim: PhasedClaim,
  ): Promise<PaymentView> {
    return claim.run(CapturePayment, { tenant, orderId, amountCents: dto.amountCents, currency: dto.currency });
  }

  @Get()
  list(@Tenant() tenant: string, @Param('id', ParseUUIDPipe) orderId: string): Promise<PaymentView[]> {
    return this.payments.listForOrder(tenant, orderId);
  }
}
