import { type CallHandler, HttpException, Inject, Injectable, type Type } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { lastValueFrom } from 'rxjs';
import type { AttemptEvent } from '../events/idempotency-events.js';
import type { Settled } from '../idempotency.interceptor.js';
import type { IdempotentRoute } from '../idempotent-route.js';
import { IdempotencyKeyReusedException, IdempotencyRequestInProgressException, operationFailedOutcome } from '../idempotency.exceptions.js';
import type { ResolvedModuleOptions } from '../idempotency.options.js';
import type { RecordId } from '../idempotency.store.js';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.tokens.js';
import { captureError, captureSuccess } from '../outcome-capture.js';
import type { RecordedOutcome } from '../recorded-outcome.js';
import { LeaseStore } from './lease.store.js';
import { OperationRegistry } from './operation-registry.js';
import { OperationRunner } from './operation.runner.js';
import { PHASED_CLAIM, type PhasedClaim } from './phased-claim.js';
import { operationName, type PhasedOperation } from './phased-operation.js';
import { LeaseLostError } from './phases.js';

const POLL_MS = 50;

/**
 * The request flow of a phased route: the claim commits first, under a
 * lease; the handler's operation commits phase by phase; the outcome is
 * recorded last, fenced by the owner token. A duplicate polls while the
 * lease is live, and takes the claim over once it lapses.
 */
@Injectable()
export class PhasedFlow {
  constructor(
    private readonly leases: LeaseStore,
    private readonly runner: OperationRunner,
    private readonly operations: OperationRegistry,
    private readonly adapterHost: HttpAdapterHost,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedModuleOptions,
  ) {}

  async execute(
    id: RecordId,
    fingerprint: string,
    route: IdempotentRoute,
    next: CallHandler,
    request: Record<symbol, unknown>,
    response: unknown,
    attempt: AttemptEvent,
  ): Promise<Settled> {
    const owner = randomUUID();
    const leaseMs = route.lease!;
    const claimStarted = performance.now();
    const claimed = await this.claimOrWait(id, fingerprint, route, owner, attempt).finally(() => (attempt.claimMs = performance.now() - claimStarted));
    if ('outcome' in claimed) return { outcome: claimed.outcome, replayed: true, expiresAt: claimed.expiresAt };
    if (claimed.tookOver) attempt.tookOver = claimed.attempts > 1 ? 'lease' : 'expired';
    if (claimed.attempts > this.options.maxAttempts) {
      const outcome = operationFailedOutcome(`gave up after ${this.options.maxAttempts} attempts`);
      if (!(await this.leases.finish(id, owner, outcome, route.retention, 'attempts exhausted'))) throw new IdempotencyRequestInProgressException(route.retryAfterSeconds);
      return { outcome, replayed: false };
    }

    const phasedClaim: PhasedClaim = {
      run: async <I, O>(operation: Type<PhasedOperation<I, O>>, input: I) => {
        const instance = this.operations.instanceOf(operation);
        const resume = { operation: operationName(operation), input, status: route.successStatus, storeErrors: [...route.storeErrors] };
        if (!(await this.leases.saveResume(id, owner, resume))) throw new LeaseLostError();
        return this.runner.run(instance, input, { id, owner, leaseMs, claimedAt: claimed.run, results: claimed.phaseResults });
      },
    };
    request[PHASED_CLAIM] = phasedClaim;
    let outcome: RecordedOutcome;
    const handlerStarted = performance.now();
    try {
      const result = await lastValueFrom(next.handle(), { defaultValue: undefined });
      attempt.handlerMs = performance.now() - handlerStarted;
      outcome = captureSuccess(result, route, this.adapterHost.httpAdapter, response);
    } catch (error) {
      if (!(error instanceof HttpException) || !route.storeErrors.has(error.getStatus())) {
        // Before the operation started (a validation error, say) nothing can have
        // happened, so the key is freed as in a rollback. After, finished phases
        // stay and the lease lapses now, so that a retry resumes at once.
        await this.abandon(id, owner).catch(() => undefined);
        throw error instanceof LeaseLostError ? new IdempotencyRequestInProgressException(route.retryAfterSeconds) : error;
      }
      outcome = captureError(error);
    }
    if (!(await this.leases.finish(id, owner, outcome, route.retention))) throw new IdempotencyRequestInProgressException(route.retryAfterSeconds);
    return { outcome, replayed: false };
  }

  private async abandon(id: RecordId, owner: string): Promise<void> {
    if (!(await this.leases.discardUnstarted(id, owner))) await this.leases.release(id, owner);
  }

  private async claimOrWait(
    id: RecordId,
    fingerprint: string,
    route: IdempotentRoute,
    owner: string,
    attempt: AttemptEvent,
  ): Promise<{ outcome: RecordedOutcome; expiresAt: Date } | { tookOver: boolean; attempts: number; phaseResults: Record<string, unknown>; run: string }> {
    const deadline = Date.now() + route.wait;
    for (;;) {
      const claim = await this.leases.claim(id, fingerprint, route.retention, route.lease!, owner);
      if (claim.claimed) return claim;
      const record = await this.leases.read(id);
      if (record && record.fingerprint !== fingerprint) throw new IdempotencyKeyReusedException();
      if (record?.outcome) return { outcome: record.outcome, expiresAt: record.expiresAt };
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw new IdempotencyRequestInProgressException(route.retryAfterSeconds);
      // A lapsed lease (or a vanished record) is claimable at once; a live one is polled.
      if (record?.leaseLive) {
        attempt.collided = true; // it met an owner in flight
        await sleep(Math.min(POLL_MS, remaining));
      }
    }
  }
}
