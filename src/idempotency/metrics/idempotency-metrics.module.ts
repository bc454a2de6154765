import { type DynamicModule, Module } from '@nestjs/common';
import { Registry } from 'prom-client';
import { IDEMPOTENCY_METRICS_REGISTRY, IdempotencyMetrics } from './idempotency-metrics.js';
import { OutboxMetrics } from './outbox-metrics.js';

/** The options of `IdempotencyMetricsModule.forRoot()`. */
export interface IdempotencyMetricsOptions {
  /** Where the metrics register. Default a registry of their own, exported as `IDEMPOTENCY_METRICS_REGISTRY`. */
  registry?: Registry;
}

/**
 * Prometheus metrics for IdempotencyModule, from its own entry point so that
 * the core module never loads prom-client. Import it next to IdempotencyModule
 * and serve the registry from a `/metrics` route.
 */
@Module({})
export class IdempotencyMetricsModule {
  /** Registers the metrics in `options.registry`, or in a registry of their own. */
  static forRoot(options: IdempotencyMetricsOptions = {}): DynamicModule {
    return {
      module: IdempotencyMetricsModule,
      global: true,
      providers: [{ provide: IDEMPOTENCY_METRICS_REGISTRY, useValue: options.registry ?? new Registry() }, IdempotencyMetrics, OutboxMetrics],
      exports: [IDEMPOTENCY_METRICS_REGISTRY],
    };
  }
}
