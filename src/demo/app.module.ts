import { type DynamicModule, type MiddlewareConsumer, Module, type NestModule, ValidationPipe, type ValidationPipeOptions } from '@nestjs/common';
import { APP_FILTER, APP_GUARD, APP_PIPE } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { API_KEYS, ApiKeyGuard, tenantOfRequest } from './auth/api-key.guard.js';
import { DEFAULT_API_KEYS, parseApiKeys } from './auth/api-keys.js';
import { DEFAULT_ADMIN_API_KEYS, demoAdminModule } from './auth/admin-keys.js';
import { dataSourceOptions } from './database/data-source-options.js';
import { PoolErrorListener } from './database/pool-error-listener.js';
import { HealthModule } from './health/health.module.js';
import { BODY_LIMIT_BYTES } from './http/http-setup.js';
import { JsonBodyGuard } from './http/json-body.guard.js';
import { JsonBodyMiddleware } from './http/json-body.middleware.js';
import { ProblemDetailsFilter } from './http/problem-details.filter.js';
import { TenantRateLimitGuard } from './http/tenant-rate-limit.guard.js';
import { IdempotencyModule, type IdempotencyModuleOptions } from '../idempotency/index.js';
import { IdempotencyOutboxModule } from '../idempotency/outbox/index.js';
import { IdempotencyMetricsModule } from '../idempotency/metrics/index.js';
import { FulfilmentModule } from './fulfilment/fulfilment.module.js';
import { CrashAfterCommit } from './messaging/crash-faults.js';
import { type DeliveryOptions, outboxOptions } from './messaging/delivery.js';
import { MetricsController } from './metrics/metrics.controller.js';
import { OrdersModule } from './orders/orders.module.js';
import { PaymentsModule } from './payments/payments.module.js';

export interface AppOptions {
  databaseUrl: string;
  /** `key:tenant,key:tenant`; default `API_KEYS` from the environment, else the documented demo keys. */
  apiKeys?: string;
  /** The operators' keys of the admin page, `key:*,key:tenant|tenant`; default `ADMIN_API_KEYS` from the environment, else the documented demo keys. */
  adminApiKeys?: string;
  /** Base URL of the payment provider (the fake one, in the demo). */
  paymentProviderUrl: string;
  /** How long a charge may take before its outcome counts as unclear. Default 5 s. */
  paymentTimeoutMs?: number;
  /** Overrides of the idempotency module's options, e.g. a short lease in tests. */
  idempotency?: Omit<IdempotencyModuleOptions, 'tenant'>;
  /** Requests per tenant per minute; 0 turns the limit off. Default `TENANT_RATE_LIMIT`, else 600. */
  tenantRateLimit?: number;
  /** Redis that instances share the rate limit's counts in; default `REDIS_URL`. Unset, each instance counts on its own. */
  redisUrl?: string;
  /** The GraphQL endpoint to serve, `DemoGraphqlModule.forAdapter(adapter)`; none by default. */
  graphql?: DynamicModule;
  /** Event delivery: the relay and the fulfilment consumer run where NATS is set. Default off. */
  delivery?: DeliveryOptions;
}

/** The demo's request validation: unknown fields are refused, not dropped. */
export const VALIDATION_OPTIONS: ValidationPipeOptions = { whitelist: true, forbidNonWhitelisted: true, transform: true };

/** The demo orders app. */
@Module({})
export class AppModule implements NestModule {
  configure(consumer: MiddlewareConsumer): void {
    consumer.apply(JsonBodyMiddleware).forRoutes('*path');
  }

  static forRoot(options: AppOptions): DynamicModule {
    const rateLimit = options.tenantRateLimit ?? Number(process.env.TENANT_RATE_LIMIT ?? 600);
    const rateLimited = rateLimit > 0;
    return {
      module: AppModule,
      imports: [
        TypeOrmModule.forRoot(dataSourceOptions(options.databaseUrl)),
        // CrashAfterCommit wraps the fulfilment handler on purpose: it injects the chaos run's crash after the commit.
        IdempotencyModule.forRoot({
          allowInterceptorsAround: [CrashAfterCommit],
          ...options.idempotency,
          // A body no parser reads (a JSON type Express's parser skips, binary) is bounded as the parsed ones are.
          maxBodyBytes: options.idempotency?.maxBodyBytes ?? BODY_LIMIT_BYTES,
          tenant: tenantOfRequest,
        }),
        IdempotencyOutboxModule.forRootAsync({ useFactory: () => (options.delivery ? outboxOptions(options.delivery) : {}) }),
        IdempotencyMetricsModule.forRoot(),
        demoAdminModule(options.adminApiKeys ?? process.env.ADMIN_API_KEYS ?? DEFAULT_ADMIN_API_KEYS),
        HealthModule,
        OrdersModule,
        ...(options.delivery?.natsServers && options.delivery.consumer ? [FulfilmentModule] : []),
        PaymentsModule.forRoot({ url: options.paymentProviderUrl, timeoutMs: options.paymentTimeoutMs }),
        ...(options.graphql ? [options.graphql] : []),
        ...(rateLimited ? [TenantRateLimitGuard.module({ limit: rateLimit, redisUrl: options.redisUrl ?? process.env.REDIS_URL })] : []),
      ],
      controllers: [MetricsController],
      providers: [
        { provide: API_KEYS, useValue: parseApiKeys(options.apiKeys ?? process.env.API_KEYS ?? DEFAULT_API_KEYS) },
        // Guards run in this order: the API key names the tenant the rate limit counts; then the body's shape,
        // before any interceptor claims a key.
        { provide: APP_GUARD, useClass: ApiKeyGuard },
        ...(rateLimited ? [{ provide: APP_GUARD, useClass: TenantRateLimitGuard }] : []),
        { provide: APP_GUARD, useClass: JsonBodyGuard },
        { provide: APP_PIPE, useValue: new ValidationPipe(VALIDATION_OPTIONS) },
        { provide: APP_FILTER, useClass: ProblemDetailsFilter },
        PoolErrorListener,
      ],
    };
  }
}
