import { Module } from '@nestjs/common';
import { CrashAfterCommit } from '../messaging/crash-faults.js';
import { FulfilmentController } from './fulfilment.controller.js';
import { FulfilmentService } from './fulfilment.service.js';

/** The fulfilment consumer: a message handler, served by the JetStream transport. */
@Module({
  controllers: [FulfilmentController],
  providers: [FulfilmentService, CrashAfterCommit],
})
export class FulfilmentModule {}
