import { type CallHandler, type ExecutionContext, Injectable, type NestInterceptor } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { performance } from 'node:perf_hooks';
import { defer, mergeMap, type Observable, of, throwError } from 'rxjs';
import { attemptEvent, HTTP_ERRORS, unavailableOr } from './events/attempt-event.js';
import { hashKey, IdempotencyEvents } from './events/idempotency-events.js';
import { FastReplay } from './fast-replay.js';
import { GraphqlMutationFlow } from './graphql/graphql-mutation.flow.js';
import { headerValues, parseIdempotencyKey, type ParsedIdempotencyKey } from './idempotency-key.js';
import { IdempotencyKeyMalformedException, IdempotencyKeyMissingException, IdempotencyRequestInProgressException, IdempotencyRequestNotCanonicalException } from './idempotency.exceptions.js';
import type { RecordId } from './records/stored-record.js';
import { IdempotentRoutes, type IdempotentRoute } from './idempotent-route.js';
import { OneTransactionFlow, type OneTransactionTerms } from './one-transaction.flow.js';
import { captureSuccess } from './outcome-capture.js';
import { PhasedFlow } from './phases/phased-flow.js';
import { applyOutcomeHeaders, type FlowEnding, NO_STEPS, type RecordedOutcome, RecordedOutcomeResponse, replayable, type Settled } from './recorded-outcome.js';
import { ReplayCache } from './replay-cache.js';
import { fingerprintRequest } from './request-fingerprint.js';

/** Requests an `IdempotencyInterceptor` has taken, so that a second one bound to the same route passes them through. */
const entered = new WeakSet<object>();

/**
 * The dispatcher of an `@Idempotent()` route or GraphQL mutation: parse the
 * key, answer from the cache or the fast read, else hand the request to its
 * flow (one-transaction.flow.ts, or phases/phased-flow.ts), emit the one
 * attempt event of the request, send.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  constructor(
    private readonly routes: IdempotentRoutes,
    private readonly cache: ReplayCache,
    private readonly fast: FastReplay,
    private readonly oneTransaction: OneTransactionFlow,
    private readonly phased: PhasedFlow,
    private readonly mutations: GraphqlMutationFlow,
    private readonly events: IdempotencyEvents,
    private readonly adapterHost: HttpAdapterHost,
  ) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.getType<string>() === 'graphql') return this.mutations.intercept(context, next, (key, route, call) => this.attempt(key, route, call, undefined, next));
    const route = context.getType() === 'http' ? this.routes.of(context.getClass(), context.getHandler()) : undefined;
    if (!route) return next.handle();
    const request = context.switchToHttp().getRequest();
    // A class-level and a handler's own @Idempotent() each bind the interceptor: the outer one runs the flow.
    if (entered.has(request)) return next.handle();
    entered.add(request);
    const response = context.switchToHttp().getResponse();
    const key = parseIdempotencyKey(headerValues(request, route.headerName));
    if (key.kind === 'missing' && !route.required) return next.handle();
    return this.attempt(key, route, request, response, next).pipe(mergeMap(({ outcome, replayed }) => this.send(outcome, route, response, replayed)));
  }

  /** Settles one request (or GraphQL field), and emits its attempt event once it has. */
  private attempt(key: ParsedIdempotencyKey, route: IdempotentRoute, request: any, response: unknown, next: CallHandler): Observable<Settled> {
    return defer(async () => {
      const start = performance.now();
      let keyHash: string | undefined;
      let ending: FlowEnding;
      try {
        if (key.kind === 'missing') throw new IdempotencyKeyMissingException(route.headerName);
        if (key.kind === 'malformed') throw new IdempotencyKeyMalformedException(route.headerName, key.reason);
        const id: RecordId = { scope: route.scopeOf(request), operation: route.operation, key: key.key };
        keyHash = hashKey(id);
        ending = await this.dispatch(id, route, request, response, next);
      } catch (error) {
        ending = { steps: NO_STEPS, error };
      }
      const error = ending.settled ? undefined : unavailableOr(ending.error);
      this.events.emit(attemptEvent(route.operation, keyHash, ending, error, HTTP_ERRORS, start));
      if (ending.settled) return ending.settled;
      throw error;
    });
  }

  /** A replay from the cache or the fast read, else the route's flow; what it settles on is cached. */
  private async dispatch(id: RecordId, route: IdempotentRoute, request: any, response: unknown, next: CallHandler): Promise<FlowEnding> {
    const fingerprint = this.fingerprint(route, request);
    const askedAt = this.cache.readClocks(); // before the database is asked, so that cached lifetimes err short
    const cached = this.cache.get(id);
    if (cached) return { steps: NO_STEPS, settled: { outcome: replayable(cached, fingerprint), replayed: true } };
    const found = await this.fast.find(id, fingerprint);
    const ending: FlowEnding = found
      ? { steps: NO_STEPS, settled: found }
      : route.lease
        ? await this.phased.execute(id, fingerprint, route, next, request, response)
        : await this.oneTransaction.execute(id, fingerprint, this.termsOf(route, response), next);
    const { settled } = ending;
    if (settled?.expiresAt && settled.databaseNow) this.cache.set(id, fingerprint, settled.outcome, { expiresAt: settled.expiresAt, databaseNow: settled.databaseNow }, askedAt);
    return ending;
  }

  private fingerprint(route: IdempotentRoute, request: unknown): string {
    try {
      return fingerprintRequest(route.operation, route.fingerprintFieldsOf(request));
    } catch (error) {
      throw new IdempotencyRequestNotCanonicalException((error as Error).message);
    }
  }

  /** A route's (or a GraphQL field's) terms for the one-transaction flow. */
  private termsOf(route: IdempotentRoute, response: unknown): OneTransactionTerms {
    return {
      retention: route.retention,
      wait: route.wait,
      capture: (result) => (route.capture ? route.capture(result) : captureSuccess(result, route, this.adapterHost.httpAdapter, response)),
      ...(route.recordsErrors && { storesError: (error: unknown) => route.storesError(error) }),
      inProgress: () => new IdempotencyRequestInProgressException(route.retryAfterSeconds),
      observeHeld: (held) => this.fast.observe(route.operation, held),
    };
  }

  /** Answers with an outcome: on the normal path for the route's status, through the filter otherwise. */
  private send(outcome: RecordedOutcome, route: IdempotentRoute, response: unknown, replayed: boolean): Observable<unknown> {
    if (outcome.status !== route.successStatus) return throwError(() => new RecordedOutcomeResponse(outcome, replayed));
    applyOutcomeHeaders(this.adapterHost.httpAdapter, response, outcome, replayed);
    return of(outcome.body ?? undefined);
  }
}
