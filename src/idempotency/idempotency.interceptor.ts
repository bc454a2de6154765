import { type CallHandler, type ExecutionContext, HttpException, Inject, Injectable, type NestInterceptor } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { performance } from 'node:perf_hooks';
import { defer, lastValueFrom, mergeMap, type Observable, of, tap, throwError } from 'rxjs';
import type { EntityManager } from 'typeorm';
import { ClaimTransaction } from './claim-transaction.js';
import { CurrentOperation } from './current-operation.js';
import { type AttemptEvent, type AttemptOutcome, hashKey, IdempotencyEvents, timeStep } from './events/idempotency-events.js';
import { IdempotentRoutes, type IdempotentRoute } from './idempotent-route.js';
import {
  IdempotencyDatabaseUnavailableException,
  IdempotencyKeyMalformedException,
  IdempotencyKeyMissingException,
  IdempotencyKeyReusedException,
  IdempotencyRecordUndecryptableException,
  IdempotencyRequestInProgressException,
  IdempotencyRequestNotCanonicalException,
} from './idempotency.exceptions.js';
import { type ClaimRow, hasOutcome, IdempotencyStatements, type LiveRecordRow, type RecordId, type RecordRow, toStoredRecord } from './idempotency.store.js';
import { asUnavailable, isLockTimeout } from './database-errors.js';
import { IdempotencyDataSource } from './idempotency-data-source.js';
import { headerValues, parseIdempotencyKey, type ParsedIdempotencyKey } from './idempotency-key.js';
import { GraphqlMutationFlow } from './graphql/graphql-mutation.flow.js';
import { PhasedFlow } from './phases/phased-flow.js';
import { captureError, captureSuccess } from './outcome-capture.js';
import { OutcomeCodec } from './outcome-codec.js';
import { applyOutcomeHeaders, type RecordedOutcome, RecordedOutcomeResponse, type Settled } from './recorded-outcome.js';
import { ReplayCache } from './replay-cache.js';
import { ReplayLikelihood } from './replay-likelihood.js';
import type { ResolvedModuleOptions } from './idempotency.options.js';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from './idempotency.tokens.js';
import { fingerprintRequest } from './request-fingerprint.js';
import { TransactionHost } from './transaction-host.js';

const SAVEPOINT_NAME = 'idempotency_claim';
const SAVEPOINT = `SAVEPOINT ${SAVEPOINT_NAME}`;

/** Requests an `IdempotencyInterceptor` has taken, so that a second one bound to the same route passes them through. */
const entered = new WeakSet<object>();

/**
 * The request flow of an `@Idempotent()` route: parse the key, replay a
 * cached outcome, or claim the key and run the handler, recording its
 * outcome in the same transaction, committed before the response is sent.
 * A claim that finds the key held replays the record instead. Every request
 * ends in exactly one attempt event.
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
    private readonly phased: PhasedFlow,
    private readonly mutations: GraphqlMutationFlow,
    private readonly events: IdempotencyEvents,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedModuleOptions,
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
  private attempt(key: ParsedIdempotencyKey, route: IdempotentRoute, request: unknown, response: unknown, next: CallHandler): Observable<Settled> {
    const attempt: AttemptEvent = { kind: 'attempt', operation: route.operation, outcome: 'executed', collided: false, timeline: { start: performance.now() } };
    return defer(() => this.settle(key, route, request, response, next, attempt).catch(asUnavailable)).pipe(
      tap({
        next: ({ outcome, replayed }) => this.events.emit({ ...attempt, outcome: replayed ? 'replayed' : 'executed', status: outcome.status }),
        error: (error: unknown) =>
          this.events.emit({
            ...attempt,
            outcome: outcomeOfError(error),
            status: statusOf(error),
            ...(error instanceof IdempotencyRecordUndecryptableException && { undecryptable: error.reason }),
          }),
      }),
    );
  }

  private async settle(key: ParsedIdempotencyKey, route: IdempotentRoute, request: any, response: unknown, next: CallHandler, attempt: AttemptEvent): Promise<Settled> {
    if (key.kind === 'missing') throw new IdempotencyKeyMissingException(route.headerName);
    if (key.kind === 'malformed') throw new IdempotencyKeyMalformedException(route.headerName, key.reason);
    const id: RecordId = { scope: route.scopeOf(request), operation: route.operation, key: key.key };
    attempt.keyHash = hashKey(id);
    const fingerprint = this.fingerprint(route, request);
    const askedAt = this.cache.readClocks(); // before the database is asked, so that cached lifetimes err short
    const cached = this.cache.get(id);
    if (cached) return { outcome: replayable(cached, fingerprint), replayed: true };
    const found = this.replays.likely(route.operation) ? await this.findLive(id, fingerprint) : undefined;
    // Otherwise no look-up first: a claim costs the first execution nothing extra, and it finds a held key itself.
    const settled =
      found ??
      (route.lease
        ? await this.phased.execute(id, fingerprint, route, next, request, response, attempt)
        : await this.executeOnce(id, fingerprint, route, next, response, attempt));
    if (settled.expiresAt && settled.databaseNow) this.cache.set(id, fingerprint, settled.outcome, { expiresAt: settled.expiresAt, databaseNow: settled.databaseNow }, askedAt);
    return settled;
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

  /** Claims the key and runs the handler, or replays the record that holds the key. */
  private async executeOnce(id: RecordId, fingerprint: string, route: IdempotentRoute, next: CallHandler, response: unknown, attempt: AttemptEvent): Promise<Settled> {
    const runner = this.served.dataSource.createQueryRunner();
    let transaction: ClaimTransaction | undefined;
    try {
      const claimStarted = performance.now();
      const claim = IdempotencyStatements.claim(id, fingerprint, route.retention, route.wait);
      // The savepoint rides along with the claim; it is only ever rolled back to after a claim that succeeded.
      const begun = await ClaimTransaction.begin<ClaimRow>(runner, this.options, claim, ...(route.recordsErrors ? [SAVEPOINT] : []))
        .catch((error: unknown) => {
          if (!isLockTimeout(error)) throw error;
          attempt.collided = true;
          throw new IdempotencyRequestInProgressException(route.retryAfterSeconds);
        })
        .finally(() => {
          attempt.claimMs = performance.now() - claimStarted;
          timeStep(attempt, 'claim', claimStarted);
        });
      transaction = begun.transaction;
      const [row] = begun.first.rows;
      this.replays.observe(id.operation, !row.claimed);
      if (!row.claimed) return await this.replayHolder(transaction, id, fingerprint, row.fingerprint == null ? undefined : row, route, attempt);
      if (row.took_over) attempt.tookOver = 'expired';
      const handlerStarted = performance.now();
      const claimed = transaction;
      const outcome = await CurrentOperation.run(id, () => this.runHandler(claimed, runner.manager, route, next, response)).finally(() =>
        timeStep(attempt, 'handler', handlerStarted),
      );
      attempt.handlerMs = performance.now() - handlerStarted;
      const commitStarted = performance.now();
      await transaction
        .commitWith(IdempotencyStatements.complete(id, this.outcomes.encode(id, outcome)))
        .catch((error: Error) => {
          this.events.emit({ kind: 'commit_failed', operation: id.operation, keyHash: attempt.keyHash!, error: error.message });
          throw error;
        })
        .finally(() => timeStep(attempt, 'commit', commitStarted));
      return { outcome, replayed: false, expiresAt: row.expires_at, databaseNow: row.database_now };
    } catch (error) {
      await transaction?.rollback();
      throw error;
    } finally {
      await runner.release();
    }
  }

  /**
   * The key is held. A live record the claim's snapshot could see was
   * committed before it; none means an owner committed while the claim
   * waited on its row (a first execution, or a takeover of an expired
   * record), and a fresh read finds what it recorded. Neither read returns an
   * expired record: nothing replays, nor answers 422, from one.
   */
  private async replayHolder(transaction: ClaimTransaction, id: RecordId, fingerprint: string, row: ClaimRow | undefined, route: IdempotentRoute, attempt: AttemptEvent): Promise<Settled> {
    if (!row) attempt.collided = true;
    const holder = row ?? (await transaction.query<LiveRecordRow>(IdempotencyStatements.readRecord(id))).rows[0];
    await transaction.rollback();
    // An outcome that does not decrypt throws here: it is not replayed, and the claim took nothing over.
    const record = holder && toStoredRecord(holder as RecordRow, id, this.outcomes);
    if (!record?.outcome) throw new IdempotencyRequestInProgressException(route.retryAfterSeconds);
    return { outcome: replayable(record, fingerprint), replayed: true, expiresAt: record.expiresAt, databaseNow: holder.database_now };
  }

  /**
   * Runs the handler with the claim's transaction as the current one. A
   * failure that `storeErrors` lists or `storeIf` selects undoes the
   * handler's writes only (back to the savepoint after the claim) and
   * becomes the recorded outcome.
   */
  private async runHandler(transaction: ClaimTransaction, manager: EntityManager, route: IdempotentRoute, next: CallHandler, response: unknown): Promise<RecordedOutcome> {
    try {
      // next.handle() binds the async context, so it is called inside run().
      const result = await this.transactions.run(manager, () => lastValueFrom(next.handle(), { defaultValue: undefined }));
      return route.capture ? route.capture(result) : captureSuccess(result, route, this.adapterHost.httpAdapter, response);
    } catch (error) {
      if (!route.storesError(error)) throw error;
      await transaction.query(`ROLLBACK TO SAVEPOINT ${SAVEPOINT_NAME}`);
      return captureError(error);
    }
  }

  /** Answers with an outcome: on the normal path for the route's status, through the filter otherwise. */
  private send(outcome: RecordedOutcome, route: IdempotentRoute, response: unknown, replayed: boolean): Observable<unknown> {
    if (outcome.status !== route.successStatus) return throwError(() => new RecordedOutcomeResponse(outcome, replayed));
    applyOutcomeHeaders(this.adapterHost.httpAdapter, response, outcome, replayed);
    return of(outcome.body ?? undefined);
  }
}

/** The record's outcome, if it was recorded for this same request. */
function replayable(record: { fingerprint: string; outcome: RecordedOutcome | null }, fingerprint: string): RecordedOutcome {
  if (record.fingerprint !== fingerprint) throw new IdempotencyKeyReusedException();
  return record.outcome!;
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

function statusOf(error: unknown): number {
  return error instanceof HttpException ? error.getStatus() : 500;
}
