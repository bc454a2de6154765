import { type CallHandler, type ExecutionContext, Injectable, type NestInterceptor } from '@nestjs/common';
import { performance } from 'node:perf_hooks';
import type { Observable } from 'rxjs';
import { attemptEvent, HTTP_ERRORS, unavailableOr } from '../events/attempt-event.js';
import { headerValues, parseIdempotencyKey, type ParsedIdempotencyKey } from './idempotency-key.js';
import { IdempotencyKeyMalformedException, IdempotencyKeyMissingException } from '../errors/idempotency.exceptions.js';
import { IdempotencyFacade } from './idempotency.facade.js';
import type { Attempt } from './idempotency-extensions.js';
import type { RecordId } from '../records/stored-record.js';
import type { RequestFingerprint } from '../fingerprint/request-fingerprints.js';
import { fingerprintOf, type IdempotentRoute, oneTransactionTermsOf } from './idempotent-route.js';
import { type RouteCall, type RouteFields, routeFieldsOf } from './route-fields.js';
import { fieldsJsonOf } from '../fingerprint/request-fingerprint.js';
import { applyOutcomeHeaders, type FlowEnding, NO_STEPS, replayable, RecordedOutcomeResponse, type Settled } from '../outcome/recorded-outcome.js';
import { ResponseGuard } from '../outcome/response-guard.js';
import { andThen, settling } from './settling.js';
import { Abandonment, HandlerAbandonedError } from '../flow/handler-run.js';

/** Requests an `IdempotencyInterceptor` has taken, so that a second one bound to the same route passes them through. */
const entered = new WeakSet<object>();

/**
 * The dispatcher of an `@Idempotent()` route: parse the key, answer from
 * the cache or the fast read, else hand the request to its flow
 * (flow/one-transaction.flow.ts, or phases/phased-flow.ts), emit the one
 * attempt event of the request, send. A message handler's call (`rpc`) or
 * a GraphQL field's goes to the feature module that serves it
 * (`IdempotencyExtensions`), with this attempt: one interceptor bound per
 * handler, as each one bound costs every request a layer of Nest's
 * interceptor chain.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  /** The core's attempt, for the calls a feature module serves. */
  private readonly attempts: Attempt = (key, call) => this.attempt(key, call);

  constructor(private readonly idempotency: IdempotencyFacade) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const type = context.getType<string>();
    if (type === 'rpc' || type === 'graphql') return this.idempotency.extensions.intercept(type, context, next, this.attempts);
    const route = type === 'http' ? this.idempotency.routes.of(context.getClass(), context.getHandler()) : undefined;
    if (!route) return next.handle();
    const http = context.switchToHttp();
    const request = http.getRequest();
    // A class-level and a handler's own @Idempotent() each bind the interceptor: the outer one runs the flow.
    if (entered.has(request)) return next.handle();
    entered.add(request);
    const key = parseIdempotencyKey(headerValues(request, route.headerName));
    if (key.kind === 'missing' && !route.required) return next.handle();
    const response = http.getResponse();
    const abandonment = new Abandonment();
    return settling(
      () => andThen(this.attempt(key, { route, request, response, next, abandonment }), (settled) => this.send(settled, route, response)),
      () => abandonment.abandon(),
    );
  }

  /**
   * Settles one request (or GraphQL field), and emits its attempt event once
   * it has. A replay from the cache settles at once; anything else, once its
   * flow has ended.
   */
  private attempt(key: ParsedIdempotencyKey, call: RouteCall): Settled | Promise<Settled> {
    const { route } = call;
    const start = performance.now();
    let id: RecordId | undefined;
    let ending: FlowEnding | Promise<FlowEnding>;
    try {
      if (key.kind === 'missing') throw new IdempotencyKeyMissingException(route.headerName);
      if (key.kind === 'malformed') throw new IdempotencyKeyMalformedException(route.headerName, key.reason);
      id = { scope: route.scopeOf(call.request), operation: route.operation, key: key.key };
      ending = this.dispatch(id, call);
    } catch (error) {
      ending = { steps: NO_STEPS, error };
    }
    if (!(ending instanceof Promise)) return this.concluded(route, id, ending, start);
    return ending.then(
      (flowEnding) => this.concluded(route, id, flowEnding, start),
      (error: unknown) => this.concluded(route, id, { steps: NO_STEPS, error }, start),
    );
  }

  /** Emits the attempt event of an ended flow; returns what it settled on, or throws the error it answers with. */
  private concluded(route: IdempotentRoute, id: RecordId | undefined, ending: FlowEnding, start: number): Settled {
    const error = ending.settled ? undefined : unavailableOr(ending.error);
    this.idempotency.events.emit(attemptEvent({ operation: route.operation, id }, ending, error, HTTP_ERRORS, start));
    if (ending.settled) return ending.settled;
    throw error;
  }

  /** A replay from the cache, at once; else the fast read or the route's flow. */
  private dispatch(id: RecordId, call: RouteCall): FlowEnding | Promise<FlowEnding> {
    const fields = routeFieldsOf(call.route, call.request, call.response);
    return fields instanceof Promise ? fields.then((read) => this.dispatchFields(id, call, read)) : this.dispatchFields(id, call, fields);
  }

  private dispatchFields(id: RecordId, call: RouteCall, { fields, bodyReadAs }: RouteFields): FlowEnding | Promise<FlowEnding> {
    const { route } = call;
    // Taken now, as the request arrived: a handler may edit its input in place before the entry is cached.
    // A body the module read is no parser's data: compared by its fingerprint alone.
    const fieldsJson = route.fieldsAreData && bodyReadAs === undefined ? fieldsJsonOf(fields) : undefined;
    const cached = this.idempotency.cache.get(id);
    // The same JSON of parsed data is the same canonical JSON: no need to canonicalise and hash to replay.
    if (cached?.fieldsJson !== undefined && cached.fieldsJson === fieldsJson) return { steps: NO_STEPS, settled: { outcome: cached.outcome, replayed: true } };
    const fingerprint = fingerprintOf(route, this.idempotency.fingerprints, id, fields, bodyReadAs);
    if (cached) return { steps: NO_STEPS, settled: { outcome: replayable(cached, fingerprint), replayed: true } };
    return this.uncached(id, fingerprint, fieldsJson, call);
  }

  /** The fast read, else the route's flow; what it settles on is cached. */
  private async uncached(id: RecordId, fingerprint: RequestFingerprint, fieldsJson: string | undefined, call: RouteCall): Promise<FlowEnding> {
    const { cache, fast } = this.idempotency;
    const askedAt = cache.readClocks(); // before the database is asked, so that cached lifetimes err short
    const found = await fast.find(id, fingerprint);
    const ending: FlowEnding = found ? { steps: NO_STEPS, settled: found } : await this.run(id, fingerprint, call);
    const { settled } = ending;
    if (settled?.expiresAt && settled.databaseNow) cache.set(id, { fingerprint: fingerprint.value, fieldsJson }, settled.outcome, { expiresAt: settled.expiresAt, databaseNow: settled.databaseNow }, askedAt);
    return ending;
  }

  /**
   * Runs the route's flow, with an HTTP response held while it does: what
   * the handler writes to it itself is held back, and answered with a 500
   * problem, since nothing may leave before the transaction has ended. Once
   * an operator around the route gave up on it, its answer (a 408) goes out
   * instead, and the flow rolls back.
   */
  private async run(id: RecordId, fingerprint: RequestFingerprint, { route, request, response, next, abandonment }: RouteCall): Promise<FlowEnding> {
    const { extensions, oneTransaction, adapterHost } = this.idempotency;
    if (abandonment?.isAbandoned) return { steps: NO_STEPS, error: new HandlerAbandonedError() };
    const guard = response === undefined ? undefined : ResponseGuard.hold(response);
    const stopListening = guard && abandonment?.onAbandon(() => guard.abandon());
    try {
      if (route.lease) return await extensions.executePhased(id, fingerprint, { route, next, request, response });
      const terms = oneTransactionTermsOf(route, adapterHost.httpAdapter, response, guard);
      terms.abandonment = abandonment;
      return await oneTransaction.execute(id, fingerprint, terms, next);
    } finally {
      stopListening?.();
      guard?.release();
    }
  }

  /** Answers with an outcome: on the normal path for the route's status, through the filter otherwise. */
  private send({ outcome, replayed }: Settled, route: IdempotentRoute, response: unknown): string | undefined {
    if (outcome.status !== route.successStatus) throw new RecordedOutcomeResponse(outcome, replayed);
    const adapter = this.idempotency.adapterHost.httpAdapter;
    // The route's status, whatever a replayed request's handler set on this response.
    adapter.status(response, outcome.status);
    applyOutcomeHeaders(adapter, response, outcome, replayed);
    return outcome.body ?? undefined;
  }
}
