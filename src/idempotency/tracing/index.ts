/** The optional OpenTelemetry entry point: importing it loads @opentelemetry/api. */
export { IDEMPOTENCY_TRACER_NAME, IdempotencySpanAttributes, traceIdempotency, type IdempotencyTracingOptions } from './idempotency-tracing.js';
