import { type DynamicModule, Module, ValidationPipe } from '@nestjs/common';
import { APP_GUARD, APP_PIPE } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { API_KEYS, ApiKeyGuard, type AuthenticatedRequest } from './auth/api-key.guard.js';
import { DEFAULT_API_KEYS, parseApiKeys } from './auth/api-keys.js';
import { dataSourceOptions } from './database/data-source-options.js';
import { HealthController } from './health/health.controller.js';
import { IdempotencyModule } from './idempotency/index.js';
import { OrdersModule } from './orders/orders.module.js';

export interface AppOptions {
  databaseUrl: string;
  /** `key:tenant,key:tenant`; default `API_KEYS` from the environment, else the documented demo keys. */
  apiKeys?: string;
}

/** The demo orders app. */
@Module({})
export class AppModule {
  static forRoot(options: AppOptions): DynamicModule {
    return {
      module: AppModule,
      imports: [
        TypeOrmModule.forRoot(dataSourceOptions(options.databaseUrl)),
        IdempotencyModule.forRoot({ tenant: (request: Partial<AuthenticatedRequest>) => request.tenant }),
        OrdersModule,
      ],
      controllers: [HealthController],
      providers: [
        { provide: API_KEYS, useValue: parseApiKeys(options.apiKeys ?? process.env.API_KEYS ?? DEFAULT_API_KEYS) },
        { provide: APP_GUARD, useClass: ApiKeyGuard },
        { provide: APP_PIPE, useValue: new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true, transform: true }) },
      ],
    };
  }
}
