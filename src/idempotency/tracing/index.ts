/**
 * The optional OpenTelemetry entry point: importing it loads @opentelemetry/api.
 *
 * @module nest-idempotency/tracing
 */
export { IDEMPOTENCY_TRACER_NAME, IdempotencySpanAttributes, traceIdempotency, type IdempotencyTracingOptions } from './idempotency-tracing.js';
