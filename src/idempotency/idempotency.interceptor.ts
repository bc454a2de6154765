import { type CallHandler, type ExecutionContext, HttpException, Inject, Injectable, type NestInterceptor } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { performance } from 'node:perf_hooks';
import { defer, mergeMap, type Observable, of, throwError } from 'rxjs';
import { asUnavailable } from './database-errors.js';
import { type AttemptEvent, type AttemptOutcome, hashKey, IdempotencyEvents } from './events/idempotency-events.js';
import { IdempotencyDataSource } from './idempotency-data-source.js';
import { headerValues, parseIdempotencyKey, type ParsedIdempotencyKey } from './idempotency-key.js';
import {
  IdempotencyDatabaseUnavailableException,
  IdempotencyKeyMalformedException,
  IdempotencyKeyMissingException,
  IdempotencyKeyReusedException,
  IdempotencyRecordUndecryptableException,
  IdempotencyRequestInProgressException,
  IdempotencyRequestNotCanonicalException,
} from './idempotency.exceptions.js';
import { hasOutcome, IdempotencyStatements, type LiveRecordRow, type RecordId, toStoredRecord } from './idempotency.store.js';
import { IdempotentRoutes, type IdempotentRoute } from './idempotent-route.js';
import { GraphqlMutationFlow } from './graphql/graphql-mutation.flow.js';
import { OneTransactionFlow, type OneTransactionTerms } from './one-transaction.flow.js';
import { captureSuccess } from './outcome-capture.js';
import { OutcomeCodec } from './outcome-codec.js';
import { PhasedFlow } from './phases/phased-flow.js';
import { applyOutcomeHeaders, type FlowEnding, NO_STEPS, type RecordedOutcome, RecordedOutcomeResponse, replayable, type Settled } from './recorded-outcome.js';
import { ReplayCache } from './replay-cache.js';
import { ReplayLikelihood } from './replay-likelihood.js';
import { fingerprintRequest } from './request-fingerprint.js';
import { TransactionHost } from './transaction-host.js';

/** Requests an `IdempotencyInterceptor` has taken, so that a second one bound to the same route passes them through. */
const entered = new WeakSet<object>();

/**
 * The dispatcher of an `@Idempotent()` route or mutation: parse the key,
 * answer from the cache or the fast read, else hand the request to its flow
 * (one transaction, or phased), emit one attempt event, send.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  constructor(
    private readonly routes: IdempotentRoutes,
    private readonly cache: ReplayCache,
    private readonly replays: ReplayLikelihood,
    private readonly outcomes: OutcomeCodec,
    private readonly transactions: TransactionHost,
    private readonly served: IdempotencyDataSource,
    private readonly adapterHost: HttpAdapterHost,
    private readonly oneTransaction: OneTransactionFlow,
    private readonly phased: PhasedFlow,
    private readonly mutations: GraphqlMutationFlow,
    private readonly events: IdempotencyEvents,
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

  /** Settles one request, and emits its attempt event once it has. */
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
        ending = await this.settle(id, route, request, response, next);
      } catch (error) {
        ending = { steps: NO_STEPS, error };
      }
      const error = ending.error === undefined ? undefined : unavailableOr(ending.error);
      this.events.emit(attemptEvent(route.operation, keyHash, start, ending, error));
      if (ending.settled) return ending.settled;
      throw error;
    });
  }

  /** Replays from the cache or the fast read where it can, else runs the route's flow; caches what it settles on. */
  private async settle(id: RecordId, route: IdempotentRoute, request: any, response: unknown, next: CallHandler): Promise<FlowEnding> {
    const fingerprint = this.fingerprint(route, request);
    const askedAt = this.cache.readClocks(); // before the database is asked, so that cached lifetimes err short
    const cached = this.cache.get(id);
    if (cached) return { steps: NO_STEPS, settled: { outcome: replayable(cached, fingerprint), replayed: true } };
    const found = this.replays.likely(route.operation) ? await this.findLive(id, fingerprint) : undefined;
    // Otherwise no look-up first: a claim costs the first execution nothing extra, and it finds a held key itself.
    const ending: FlowEnding = found
      ? { steps: NO_STEPS, settled: found }
      : route.lease
        ? await this.phased.execute(id, fingerprint, route, next, request, response)
        : await this.oneTransaction.execute(id, fingerprint, this.termsOf(route, response), next);
    const { settled } = ending;
    if (settled?.expiresAt && settled.databaseNow) this.cache.set(id, fingerprint, settled.outcome, { expiresAt: settled.expiresAt, databaseNow: settled.databaseNow }, askedAt);
    return ending;
  }

  /** The fast replay: one read by primary key from the pool, outside any transaction. */
  private async findLive(id: RecordId, fingerprint: string): Promise<Settled | undefined> {
    const { text, values } = IdempotencyStatements.findLive(id);
    const [row]: LiveRecordRow[] = await this.transactions.outside(() => this.served.dataSource.query(text, values));
    this.replays.observe(id.operation, row !== undefined && hasOutcome(row));
    const record = row && toStoredRecord(row, id, this.outcomes);
    if (!record?.outcome) return undefined;
    return { outcome: replayable(record, fingerprint), replayed: true, expiresAt: record.expiresAt, databaseNow: row.database_now };
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
      observeHeld: (held) => this.replays.observe(route.operation, held),
    };
  }

  /** Answers with an outcome: on the normal path for the route's status, through the filter otherwise. */
  private send(outcome: RecordedOutcome, route: IdempotentRoute, response: unknown, replayed: boolean): Observable<unknown> {
    if (outcome.status !== route.successStatus) return throwError(() => new RecordedOutcomeResponse(outcome, replayed));
    applyOutcomeHeaders(this.adapterHost.httpAdapter, response, outcome, replayed);
    return of(outcome.body ?? undefined);
  }
}

/** The one attempt event of a request, from how its flow ended. */
function attemptEvent(operation: string, keyHash: string | undefined, start: number, { steps, settled }: FlowEnding, error: unknown): AttemptEvent {
  const { timeline, ...facts } = steps;
  const attempt: AttemptEvent = { kind: 'attempt', operation, outcome: 'executed', ...(keyHash && { keyHash }), ...facts, timeline: { start, ...timeline } };
  if (settled) return { ...attempt, outcome: settled.replayed ? 'replayed' : 'executed', status: settled.outcome.status };
  return {
    ...attempt,
    outcome: outcomeOfError(error),
    status: error instanceof HttpException ? error.getStatus() : 500,
    ...(error instanceof IdempotencyRecordUndecryptableException && { undecryptable: error.reason }),
  };
}

/** A lost database connection as the module's 503, any other error as it is. */
function unavailableOr(error: unknown): unknown {
  try {
    return asUnavailable(error);
  } catch (answered) {
    return answered;
  }
}

function outcomeOfError(error: unknown): AttemptOutcome {
  if (error instanceof IdempotencyKeyMissingException) return 'key_missing';
  if (error instanceof IdempotencyKeyMalformedException) return 'key_malformed';
  if (error instanceof IdempotencyKeyReusedException) return 'key_reused';
  if (error instanceof IdempotencyRequestInProgressException) return 'conflict';
  if (error instanceof IdempotencyRequestNotCanonicalException) return 'not_canonical';
  if (error instanceof IdempotencyDatabaseUnavailableException) return 'unavailable';
  if (error instanceof IdempotencyRecordUndecryptableException) return 'undecryptable';
  return 'rolled_back';
}
