import { type CallHandler, type ExecutionContext, HttpException, Injectable, type NestInterceptor } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { defer, lastValueFrom, mergeMap, type Observable, of, throwError } from 'rxjs';
import { DataSource, type QueryRunner } from 'typeorm';
import { IdempotentRoutes, type IdempotentRoute } from './idempotent-route.js';
import {
  IdempotencyKeyMalformedException,
  IdempotencyKeyMissingException,
  IdempotencyKeyReusedException,
  IdempotencyRequestInProgressException,
  IdempotencyRequestNotCanonicalException,
} from './idempotency.exceptions.js';
import { IdempotencyStore, type RecordId, type StoredRecord } from './idempotency.store.js';
import { parseIdempotencyKey } from './idempotency-key.js';
import { PhasedFlow } from './phases/phased-flow.js';
import { captureError, captureSuccess } from './outcome-capture.js';
import { applyOutcomeHeaders, type RecordedOutcome, RecordedOutcomeResponse } from './recorded-outcome.js';
import { fingerprintRequest } from './request-fingerprint.js';
import { TransactionHost } from './transaction-host.js';

const LOCK_NOT_AVAILABLE = '55P03';

/**
 * The request flow of an `@Idempotent()` route: parse the key, replay a
 * completed record, or claim the key and run the handler, recording its
 * outcome in the same transaction, committed before the response is sent.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  constructor(
    private readonly routes: IdempotentRoutes,
    private readonly store: IdempotencyStore,
    private readonly transactions: TransactionHost,
    private readonly dataSource: DataSource,
    private readonly adapterHost: HttpAdapterHost,
    private readonly phased: PhasedFlow,
  ) {}

  async intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    const route = context.getType() === 'http' ? this.routes.of(context.getClass(), context.getHandler()) : undefined;
    if (!route) return next.handle();
    const request = context.switchToHttp().getRequest();
    const response = context.switchToHttp().getResponse();
    const parsed = parseIdempotencyKey(headerValues(request, route.headerName));
    if (parsed.kind === 'missing') {
      if (route.required) throw new IdempotencyKeyMissingException(route.headerName);
      return next.handle();
    }
    if (parsed.kind === 'malformed') throw new IdempotencyKeyMalformedException(route.headerName, parsed.reason);

    const id: RecordId = { scope: route.scopeOf(request), operation: route.operation, key: parsed.key };
    const fingerprint = this.fingerprint(route, request);
    const live = await this.store.findLive(id);
    if (live?.outcome) return this.send(replayable(live, fingerprint), route, response, true);
    const execution = route.lease
      ? () => this.phased.execute(id, fingerprint, route, next, request, response)
      : () => this.executeOnce(id, fingerprint, route, next, response);
    return defer(execution).pipe(
      mergeMap(({ outcome, replayed }) => this.send(outcome, route, response, replayed)),
    );
  }

  private fingerprint(route: IdempotentRoute, request: unknown): string {
    try {
      return fingerprintRequest(route.operation, route.fingerprintFieldsOf(request));
    } catch (error) {
      throw new IdempotencyRequestNotCanonicalException((error as Error).message);
    }
  }

  /** Claims the key and runs the handler, or replays what a concurrent owner committed meanwhile. */
  private async executeOnce(
    id: RecordId,
    fingerprint: string,
    route: IdempotentRoute,
    next: CallHandler,
    response: unknown,
  ): Promise<{ outcome: RecordedOutcome; replayed: boolean }> {
    const runner = this.dataSource.createQueryRunner();
    try {
      await runner.connect();
      await runner.startTransaction('READ COMMITTED');
      const claim = await this.store.claim(runner, id, fingerprint, route.retention, route.wait).catch((error: unknown) => {
        throw isLockTimeout(error) ? new IdempotencyRequestInProgressException(route.retryAfterSeconds) : error;
      });
      if (!claim.claimed) {
        const existing = await this.store.findClaimed(runner, id);
        await runner.rollbackTransaction();
        if (!existing?.outcome) throw new IdempotencyRequestInProgressException(route.retryAfterSeconds);
        return { outcome: replayable(existing, fingerprint), replayed: true };
      }
      const outcome = await this.runHandler(runner, route, next, response);
      await this.store.complete(runner, id, outcome);
      await runner.commitTransaction();
      return { outcome, replayed: false };
    } catch (error) {
      if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
      throw error;
    } finally {
      await runner.release();
    }
  }

  /**
   * Runs the handler with the claim's transaction as the current one. A
   * failure listed in `storeErrors` undoes the handler's writes only (back to
   * the savepoint after the claim) and becomes the recorded outcome.
   */
  private async runHandler(runner: QueryRunner, route: IdempotentRoute, next: CallHandler, response: unknown): Promise<RecordedOutcome> {
    if (route.storeErrors.size > 0) await runner.query('SAVEPOINT idempotency_claim');
    try {
      // next.handle() binds the async context, so it is called inside run().
      const result = await this.transactions.run(runner.manager, () => lastValueFrom(next.handle(), { defaultValue: undefined }));
      return captureSuccess(result, route, this.adapterHost.httpAdapter, response);
    } catch (error) {
      if (!(error instanceof HttpException) || !route.storeErrors.has(error.getStatus())) throw error;
      await runner.query('ROLLBACK TO SAVEPOINT idempotency_claim');
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
function replayable(record: StoredRecord, fingerprint: string): RecordedOutcome {
  if (record.fingerprint !== fingerprint) throw new IdempotencyKeyReusedException();
  return record.outcome!;
}

/** Every value of a header, one per header line (Express and Fastify merge repeated ones). */
function headerValues(request: { raw?: { rawHeaders: string[] }; rawHeaders?: string[] }, name: string): string[] {
  const raw = request.raw?.rawHeaders ?? request.rawHeaders ?? [];
  const wanted = name.toLowerCase();
  const values: string[] = [];
  for (let i = 0; i < raw.length; i += 2) if (raw[i].toLowerCase() === wanted) values.push(raw[i + 1]);
  return values;
}

function isLockTimeout(error: unknown): boolean {
  const failure = error as { code?: string; driverError?: { code?: string } };
  return (failure.driverError?.code ?? failure.code) === LOCK_NOT_AVAILABLE;
}
