import { Module } from '@nestjs/common';
import { IdempotencyMessagingModule } from '../../idempotency/messaging/index.js';
import { CrashAfterCommit } from '../messaging/crash-faults.js';
import { FulfilmentController } from './fulfilment.controller.js';
import { FulfilmentService } from './fulfilment.service.js';

/** The fulfilment consumer: a message handler, served by the JetStream transport. */
@Module({
  imports: [IdempotencyMessagingModule],
  controllers: [FulfilmentController],
  providers: [FulfilmentService, CrashAfterCommit],
})
export class FulfilmentModule {}
