/**
 * The optional Prometheus entry point: importing it loads prom-client.
 *
 * @module nest-idempotency/metrics
 */
export { IdempotencyMetricsModule, type IdempotencyMetricsOptions } from './idempotency-metrics.module.js';
export { IDEMPOTENCY_METRICS_REGISTRY, IdempotencyMetrics } from './idempotency-metrics.js';
export { OutboxMetrics } from './outbox-metrics.js';
