import { type Attributes, context, SpanKind, SpanStatusCode, trace, type Tracer, type TracerProvider } from '@opentelemetry/api';
import diagnosticsChannel from 'node:diagnostics_channel';
import { performance } from 'node:perf_hooks';
import { type AttemptEvent, type AttemptOutcome, type CommitFailedEvent, IDEMPOTENCY_CHANNELS } from '../events/idempotency-events.js';

/** The options of `traceIdempotency()`. */
export interface IdempotencyTracingOptions {
  /** Where the spans go. Default the global provider, as registered by the OpenTelemetry SDK (also when registered later). */
  tracerProvider?: TracerProvider;
}

/** The instrumentation scope of the spans. */
export const IDEMPOTENCY_TRACER_NAME = 'nest-idempotency';

/** The attributes of the spans. Keys appear only as their hash; tenants never. */
export const IdempotencySpanAttributes = {
  OPERATION: 'idempotency.operation',
  OUTCOME: 'idempotency.outcome',
  REPLAYED: 'idempotency.replayed',
  COLLIDED: 'idempotency.collided',
  TOOK_OVER: 'idempotency.took_over',
  KEY_HASH: 'idempotency.key_hash',
  STATUS_CODE: 'http.response.status_code',
} as const;

const STEPS = ['claim', 'handler', 'commit'] as const;
const FAILED: ReadonlySet<AttemptOutcome> = new Set(['rolled_back', 'unavailable']);
/** Commit errors wait here for their attempt event, which follows in the same request. */
const PENDING_COMMIT_ERRORS_MAX = 256;

/**
 * Turns the module's `attempt` events into OpenTelemetry spans: one span per
 * request to an idempotent route, `idempotency <operation>`, with a child for
 * each step that ran (`idempotency.claim`, `idempotency.handler`,
 * `idempotency.commit`). The spans are built after the fact from the event's
 * timeline, with explicit start and end times, so the request flow does not
 * change; they are children of the span active where the request runs (the
 * HTTP server span). Call it once, after the SDK's setup; it returns the
 * function that stops it.
 *
 * @example
 * // tracing.ts, loaded before the app
 * const sdk = new NodeSDK({ traceExporter, instrumentations: [new HttpInstrumentation()] });
 * sdk.start();
 * traceIdempotency();
 */
export function traceIdempotency(options: IdempotencyTracingOptions = {}): () => void {
  const tracer = (options.tracerProvider ?? trace.getTracerProvider()).getTracer(IDEMPOTENCY_TRACER_NAME);
  const commitErrors = new Map<string, string>();
  const onCommitFailed = (message: unknown) => {
    const event = message as CommitFailedEvent;
    if (commitErrors.size >= PENDING_COMMIT_ERRORS_MAX) commitErrors.delete(commitErrors.keys().next().value!);
    commitErrors.set(`${event.operation}\n${event.keyHash}`, event.error);
  };
  const onAttempt = (message: unknown) => {
    const event = message as AttemptEvent;
    const pendingKey = `${event.operation}\n${event.keyHash}`;
    const commitError = commitErrors.get(pendingKey);
    if (commitError !== undefined) commitErrors.delete(pendingKey);
    recordAttempt(tracer, event, commitError);
  };
  diagnosticsChannel.subscribe(IDEMPOTENCY_CHANNELS.commit_failed, onCommitFailed);
  diagnosticsChannel.subscribe(IDEMPOTENCY_CHANNELS.attempt, onAttempt);
  return () => {
    diagnosticsChannel.unsubscribe(IDEMPOTENCY_CHANNELS.attempt, onAttempt);
    diagnosticsChannel.unsubscribe(IDEMPOTENCY_CHANNELS.commit_failed, onCommitFailed);
  };
}

/** Tries at aligning the clocks before taking what it has: each is two reads of performance.now() around one of Date.now(). */
const ALIGNMENT_TRIES = 3;

/**
 * What to add to a performance.now() reading for the wall-clock time, with
 * the reading it was taken at. Date.now() is read between two readings of
 * performance.now(), and again where the two lie more than 0.1 ms apart (the
 * thread was preempted between them, on a loaded machine): the offset is
 * then off by the whole-millisecond Date.now() alone, as the spans an
 * OpenTelemetry SDK times itself are.
 */
function wallClockOffset(): { end: number; offset: number } {
  let best = { end: 0, offset: 0, gap: Infinity };
  for (let attempt = 0; attempt < ALIGNMENT_TRIES && best.gap > 0.1; attempt++) {
    const before = performance.now();
    const wall = Date.now();
    const after = performance.now();
    if (after - before < best.gap) best = { end: after, offset: wall - (before + after) / 2, gap: after - before };
  }
  return best;
}

function recordAttempt(tracer: Tracer, event: AttemptEvent, commitError: string | undefined): void {
  const { timeline } = event;
  if (!timeline) return;
  // The timeline holds performance.now() readings; spans take wall-clock times, aligned once per attempt.
  const { end, offset } = wallClockOffset();
  const attributes: Attributes = {
    [IdempotencySpanAttributes.OPERATION]: event.operation,
    [IdempotencySpanAttributes.OUTCOME]: event.outcome,
    [IdempotencySpanAttributes.REPLAYED]: event.outcome === 'replayed',
  };
  const parent = context.active();
  const span = tracer.startSpan(
    `idempotency ${event.operation}`,
    {
      kind: SpanKind.INTERNAL,
      startTime: timeline.start + offset,
      attributes: {
        ...attributes,
        [IdempotencySpanAttributes.COLLIDED]: event.collided,
        ...(event.tookOver && { [IdempotencySpanAttributes.TOOK_OVER]: event.tookOver }),
        ...(event.keyHash && { [IdempotencySpanAttributes.KEY_HASH]: event.keyHash }),
        ...(event.status !== undefined && { [IdempotencySpanAttributes.STATUS_CODE]: event.status }),
      },
    },
    parent,
  );
  const failedStep = FAILED.has(event.outcome) ? STEPS.findLast((step) => timeline[step]) : undefined;
  const withinAttempt = trace.setSpan(parent, span);
  for (const step of STEPS) {
    const timing = timeline[step];
    if (!timing) continue;
    const child = tracer.startSpan(`idempotency.${step}`, { kind: SpanKind.INTERNAL, startTime: timing.start + offset, attributes }, withinAttempt);
    if (step === failedStep) child.setStatus({ code: SpanStatusCode.ERROR, message: step === 'commit' && commitError ? commitError : `${step} failed` });
    child.end(timing.end + offset);
  }
  if ((event.status ?? 0) >= 500) span.setStatus({ code: SpanStatusCode.ERROR, message: event.outcome });
  span.end(end + offset);
}
