import { type DynamicModule, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { IdempotencyModule, type IdempotencyModuleOptions } from '../idempotency/index.js';
import { IdempotencyOutboxModule } from '../idempotency/outbox/index.js';
import { tenantOfRequest } from './auth/api-key.guard.js';
import { dataSourceOptions } from './database/data-source-options.js';
import { PoolErrorListener } from './database/pool-error-listener.js';
import { FulfilmentModule } from './fulfilment/fulfilment.module.js';
import { CrashAfterCommit } from './messaging/crash-faults.js';
import { type DeliveryOptions, outboxOptions } from './messaging/delivery.js';

export interface WorkerOptions {
  databaseUrl: string;
  delivery: DeliveryOptions;
  idempotency?: Omit<IdempotencyModuleOptions, 'tenant' | 'reaper'>;
}

/** The demo's worker process: the outbox relay and the fulfilment consumer, without HTTP. */
@Module({})
export class WorkerModule {
  static forRoot(options: WorkerOptions): DynamicModule {
    return {
      module: WorkerModule,
      imports: [
        TypeOrmModule.forRoot(dataSourceOptions(options.databaseUrl)),
        // No reaper here: the API instances reap (records and settled outbox events alike) and finish
        // the abandoned payments, whose phased operation this process does not register.
        // The API's tenant, though this process serves no HTTP route: its message handlers are scoped by messageTenant.
        IdempotencyModule.forRoot({ ...options.idempotency, tenant: tenantOfRequest, reaper: false, allowInterceptorsAround: [CrashAfterCommit] }),
        IdempotencyOutboxModule.forRootAsync({ useFactory: () => outboxOptions(options.delivery) }),
        ...(options.delivery.consumer ? [FulfilmentModule] : []),
      ],
      providers: [PoolErrorListener],
    };
  }
}
