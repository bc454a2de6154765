import { type CallHandler, HttpException, Inject, Injectable, type Type } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { lastValueFrom } from 'rxjs';
import type { AttemptEvent } from '../events/idempotency-events.js';
import type { Settled } from '../idempotency.interceptor.js';
import type { IdempotentRoute } from '../idempotent-route.js';
import {
  IdempotencyKeyReusedException,
  IdempotencyOperationUnfinishedException,
  IdempotencyRequestInProgressException,
  operationFailedOutcome,
} from '../idempotency.exceptions.js';
import type { ResolvedModuleOptions } from '../idempotency.options.js';
import type { RecordId } from '../idempotency.store.js';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.tokens.js';
import { captureError, captureSuccess } from '../outcome-capture.js';
import type { RecordedOutcome } from '../recorded-outcome.js';
import { isLockTimeout } from '../database-errors.js';
import { type LeasedClaim, LeaseStore } from './lease.store.js';
import { OperationRegistry } from './operation-registry.js';
import { OperationRunner } from './operation.runner.js';
import { PHASED_CLAIM, type PhasedClaim } from './phased-claim.js';
import { operationName, type PhasedOperation } from './phased-operation.js';
import { LeaseLostError } from './phases.js';

/**
 * Between polls of a waiting duplicate: the first after 50 ms, growing to
 * 200 ms, each jittered, so that a crowd of duplicates neither polls in step
 * nor keeps the database busy while an owner works.
 */
const FIRST_POLL_MS = 50;
const MAX_POLL_MS = 200;
/** How long one claim may wait on a row lock: a concurrent first claim commits well within it. */
const CLAIM_LOCK_TIMEOUT_MS = 50;

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
        // stay and the lease lapses now, so that a retry resumes at once; the
        // answer says so, since the effects may exist and the work may still end.
        const started = await this.abandon(id, owner).catch(() => true);
        if (error instanceof LeaseLostError) throw new IdempotencyRequestInProgressException(route.retryAfterSeconds);
        if (started) throw new IdempotencyOperationUnfinishedException(route.retryAfterSeconds, error instanceof HttpException ? error.message : undefined);
        throw error;
      }
      outcome = captureError(error);
    }
    if (!(await this.leases.finish(id, owner, outcome, route.retention))) throw new IdempotencyRequestInProgressException(route.retryAfterSeconds);
    return { outcome, replayed: false };
  }

  /** Frees the key of an operation that never started, or lets the lease of a started one lapse; true when it had started. */
  private async abandon(id: RecordId, owner: string): Promise<boolean> {
    if (await this.leases.discardUnstarted(id, owner)) return false;
    await this.leases.release(id, owner);
    return true;
  }

  /**
   * Claims the key, or polls while a live owner holds it, for up to the
   * route's `wait`. A poll is one statement from the pool that never waits
   * on the owner's row lock for long, and no connection is held between
   * polls: a crowd of duplicates neither outlasts `wait` nor drains the pool.
   */
  private async claimOrWait(
    id: RecordId,
    fingerprint: string,
    route: IdempotentRoute,
    owner: string,
    attempt: AttemptEvent,
  ): Promise<{ outcome: RecordedOutcome; expiresAt: Date } | Extract<LeasedClaim, { claimed: true }>> {
    const deadline = Date.now() + route.wait;
    for (let poll = 0; ; poll++) {
      const lockTimeoutMs = Math.min(CLAIM_LOCK_TIMEOUT_MS, deadline - Date.now());
      const claim = await this.leases.claim(id, fingerprint, route.retention, route.lease!, owner, lockTimeoutMs).catch((error: unknown) => {
        if (!isLockTimeout(error)) throw error;
        return { claimed: false, holder: undefined } as const; // a row lock held by an owner at work
      });
      if (claim.claimed) return claim;
      const holder = claim.holder;
      if (holder && holder.fingerprint !== fingerprint) throw new IdempotencyKeyReusedException();
      if (holder?.outcome) return { outcome: holder.outcome, expiresAt: holder.expiresAt };
      if (!holder || holder.leaseLive) attempt.collided = true; // it met an owner in flight
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw new IdempotencyRequestInProgressException(route.retryAfterSeconds);
      const pause = Math.min(MAX_POLL_MS, FIRST_POLL_MS * 1.5 ** poll) * (0.5 + Math.random());
      await sleep(Math.min(pause, remaining));
    }
  }
}
