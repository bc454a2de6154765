import { type CallHandler, type ExecutionContext, Injectable, type NestInterceptor } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import diagnosticsChannel from 'node:diagnostics_channel';
import { finalize, Observable } from 'rxjs';
import { type AttemptEvent, IDEMPOTENCY_CHANNELS } from '../src/idempotency/index.js';
import { traceIdempotency } from '../src/idempotency/tracing/index.js';
import { HTTP_ADAPTERS, startApp, type RunningApp } from './support/http-app.js';
import { COMMIT_FAULTS, LEDGER_SCHEMA, Ledger, ledgerAppModules } from './support/ledger-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });

/** Stands in for the HTTP instrumentation: a server span, active while the request runs. */
@Injectable()
class ServerSpan implements NestInterceptor {
  intercept(execution: ExecutionContext, next: CallHandler): Observable<unknown> {
    const request = execution.switchToHttp().getRequest();
    const span = provider.getTracer('test-http').startSpan(`${request.method} ${request.headers['x-request-name']}`, { kind: SpanKind.SERVER });
    const active = trace.setSpan(context.active(), span);
    return new Observable((subscriber) => context.with(active, () => next.handle().pipe(finalize(() => span.end())).subscribe(subscriber)));
  }
}

const ms = ([seconds, nanos]: [number, number]) => seconds * 1e3 + nanos / 1e6;

/** The spans of the one server span whose name is `name`: it, its idempotency span and that span's children by name. */
function traceOf(name: string) {
  const spans = exporter.getFinishedSpans();
  const server = spans.filter((span) => span.name === name);
  expect(server).toHaveLength(1);
  const attempt = spans.filter((span) => span.parentSpanContext?.spanId === server[0].spanContext().spanId);
  expect(attempt).toHaveLength(1);
  const steps = new Map<string, ReadableSpan>(spans.filter((span) => span.parentSpanContext?.spanId === attempt[0].spanContext().spanId).map((span) => [span.name, span]));
  return { server: server[0], attempt: attempt[0], steps };
}

describe.each(HTTP_ADAPTERS)('tracing (%s)', (adapter) => {
  let db: TestDatabase;
  let running: RunningApp;
  let stopTracing: () => void;
  let request = 0;
  /** Sends a POST whose server span is named `POST <path> <n>`, so that each request's spans can be found. */
  const post = async (path: string, key: string, label: string) => {
    const name = `${path} ${++request}`;
    const headers = { 'content-type': 'application/json', 'idempotency-key': key, 'x-tenant': 'acme', 'x-request-name': name };
    const response = await fetch(`${running.url}${path}`, { method: 'POST', headers, body: JSON.stringify({ label }) });
    await response.arrayBuffer();
    return { status: response.status, span: `POST ${name}` };
  };

  beforeAll(async () => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    stopTracing = traceIdempotency({ tracerProvider: provider });
    db = await createTestDatabase();
    await db.query(LEDGER_SCHEMA);
    // No replay cache: a replay claims, and shows a claim span. The server span leaves bodies alone, so it may run around @Idempotent().
    // Claimed first, so that the spans come in the order claim, handler, commit (at commit: handler, claim, commit).
    running = await startApp({ imports: ledgerAppModules(db.url, { replayCacheSize: 0, reaper: false, allowInterceptorsAround: [ServerSpan] }), providers: [{ provide: APP_INTERCEPTOR, useClass: ServerSpan }] }, { adapter });
    await db.query(COMMIT_FAULTS);
  });
  afterAll(async () => {
    stopTracing?.();
    context.disable();
    await running?.close();
    await db?.drop();
  });
  beforeEach(() => exporter.reset());

  it('builds claim, handler and commit spans of a first execution, in order, under the server span', async () => {
    const { status, span } = await post('/entries', 'trace-first', 'a');
    expect(status).toBe(201);
    const { server, attempt, steps } = traceOf(span);
    expect(attempt.name).toBe('idempotency POST /entries');
    expect(attempt.kind).toBe(SpanKind.INTERNAL);
    expect(attempt.spanContext().traceId).toBe(server.spanContext().traceId);
    expect(attempt.attributes).toMatchObject({
      'idempotency.operation': 'POST /entries',
      'idempotency.outcome': 'executed',
      'idempotency.replayed': false,
      'idempotency.collided': false,
      'http.response.status_code': 201,
    });
    expect(attempt.attributes['idempotency.key_hash']).toMatch(/^[0-9a-f]{16}$/);
    expect(JSON.stringify(attempt.attributes)).not.toContain('trace-first');
    expect([...steps.keys()]).toEqual(['idempotency.claim', 'idempotency.handler', 'idempotency.commit']);
    for (const step of steps.values()) expect(step.attributes).toEqual({ 'idempotency.operation': 'POST /entries', 'idempotency.outcome': 'executed', 'idempotency.replayed': false });
    // Each step inside the attempt, one after the other; the attempt inside the server span (1 ms for clock alignment).
    const [claim, handler, commit] = [...steps.values()];
    const times = [attempt.startTime, claim.startTime, claim.endTime, handler.startTime, handler.endTime, commit.startTime, commit.endTime, attempt.endTime].map(ms);
    expect(times).toEqual([...times].sort((a, b) => a - b));
    expect(ms(attempt.startTime)).toBeGreaterThanOrEqual(ms(server.startTime) - 1);
    expect(ms(attempt.endTime)).toBeLessThanOrEqual(ms(server.endTime) + 1);
    expect(attempt.status.code).toBe(SpanStatusCode.UNSET);
  });

  it('marks a replay: a claim span only', async () => {
    await post('/entries', 'trace-replay', 'r');
    exporter.reset();
    const { span } = await post('/entries', 'trace-replay', 'r');
    const { attempt, steps } = traceOf(span);
    expect(attempt.attributes).toMatchObject({ 'idempotency.outcome': 'replayed', 'idempotency.replayed': true, 'http.response.status_code': 201 });
    expect([...steps.keys()]).toEqual(['idempotency.claim']);
    expect(steps.get('idempotency.claim')!.attributes['idempotency.replayed']).toBe(true);
  });

  it('marks a 422 without an error status', async () => {
    await post('/entries', 'trace-reuse', 'one');
    const { status, span } = await post('/entries', 'trace-reuse', 'two');
    expect(status).toBe(422);
    const { attempt } = traceOf(span);
    expect(attempt.attributes).toMatchObject({ 'idempotency.outcome': 'key_reused', 'http.response.status_code': 422 });
    expect(attempt.status.code).toBe(SpanStatusCode.UNSET);
  });

  it('marks the handler span failed when the handler throws', async () => {
    running.app.get(Ledger).script.push({ fail: new Error('boom') });
    const { status, span } = await post('/entries', 'trace-handler-fails', 'h');
    expect(status).toBe(500);
    const { attempt, steps } = traceOf(span);
    expect(attempt.attributes['idempotency.outcome']).toBe('rolled_back');
    expect(attempt.status.code).toBe(SpanStatusCode.ERROR);
    expect([...steps.keys()]).toEqual(['idempotency.claim', 'idempotency.handler']);
    expect(steps.get('idempotency.handler')!.status).toEqual({ code: SpanStatusCode.ERROR, message: 'handler failed' });
    expect(steps.get('idempotency.claim')!.status.code).toBe(SpanStatusCode.UNSET);
  });

  it('marks the commit span failed, with the database error, when COMMIT fails', async () => {
    running.app.get(Ledger).script.push({ failAtCommit: true });
    const { status, span } = await post('/entries', 'trace-commit-fails', 'fail-at-commit');
    expect(status).toBe(500);
    const { attempt, steps } = traceOf(span);
    expect(attempt.status.code).toBe(SpanStatusCode.ERROR);
    expect(steps.get('idempotency.handler')!.status.code).toBe(SpanStatusCode.UNSET);
    expect(steps.get('idempotency.commit')!.status).toEqual({ code: SpanStatusCode.ERROR, message: 'scripted failure at commit' });
  });

  it('traces a phased operation: the claim, the operation and the fenced outcome write', async () => {
    const { status, span } = await post('/entries/transfers', 'trace-phased', 'p');
    expect(status).toBe(201);
    const { attempt, steps } = traceOf(span);
    expect(attempt.name).toBe('idempotency POST /entries/transfers');
    expect([...steps.keys()]).toEqual(['idempotency.claim', 'idempotency.handler', 'idempotency.commit']);
  });

  it('publishes each attempt on its diagnostics channel, in the request context, with its timeline', async () => {
    const seen: Array<{ event: AttemptEvent; active: string | undefined }> = [];
    const listener = (message: unknown) => seen.push({ event: message as AttemptEvent, active: trace.getActiveSpan()?.spanContext().spanId });
    diagnosticsChannel.subscribe(IDEMPOTENCY_CHANNELS.attempt, listener);
    try {
      const { span } = await post('/entries', 'trace-channel', 'c');
      const { server } = traceOf(span);
      expect(seen).toHaveLength(1);
      expect(seen[0].active).toBe(server.spanContext().spanId);
      const { event } = seen[0];
      expect(event).toMatchObject({ kind: 'attempt', operation: 'POST /entries', outcome: 'executed', status: 201 });
      expect(event.timeline!.claim!.end - event.timeline!.claim!.start).toBeCloseTo(event.claimMs!, 1);
    } finally {
      diagnosticsChannel.unsubscribe(IDEMPOTENCY_CHANNELS.attempt, listener);
    }
  });
});

describe('traceIdempotency', () => {
  it('stops when told to, and leaves the channels without subscribers', () => {
    const stop = traceIdempotency({ tracerProvider: provider });
    expect(diagnosticsChannel.hasSubscribers(IDEMPOTENCY_CHANNELS.attempt)).toBe(true);
    stop();
    expect(diagnosticsChannel.hasSubscribers(IDEMPOTENCY_CHANNELS.attempt)).toBe(false);
    expect(diagnosticsChannel.hasSubscribers(IDEMPOTENCY_CHANNELS.commit_failed)).toBe(false);
  });
});
