import { type DynamicModule, Module } from '@nestjs/common';
import { IdempotencyPhasesModule } from '../../idempotency/phases/index.js';
import { CapturePayment } from './capture-payment.operation.js';
import { PAYMENT_PROVIDER, PaymentProviderClient, type PaymentProviderOptions } from './payment-provider.client.js';
import { PaymentsController } from './payments.controller.js';
import { PaymentsService } from './payments.service.js';

@Module({})
export class PaymentsModule {
  static forRoot(provider: PaymentProviderOptions): DynamicModule {
    return {
      module: PaymentsModule,
      imports: [IdempotencyPhasesModule],
      controllers: [PaymentsController],
      providers: [{ provide: PAYMENT_PROVIDER, useValue: provider }, PaymentProviderClient, PaymentsService, CapturePayment],
    };
  }
}
