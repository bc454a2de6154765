import { HttpException, Inject, Injectable, Logger, type Type } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { lastValueFrom } from 'rxjs';
import {
  IdempotencyConfigurationError,
  IdempotencyKeyReusedException,
  IdempotencyOperationUnfinishedException,
  IdempotencyRequestInProgressException,
  operationFailedOutcome,
} from '../errors/idempotency.exceptions.js';
import type { ResolvedModuleOptions } from '../options/idempotency.options.js';
import type { OutcomeRecord, RecordId } from '../records/stored-record.js';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../options/idempotency.tokens.js';
import { captureError, captureSuccess } from '../outcome/outcome-capture.js';
import type { FlowEnding, FlowSteps, RecordedOutcome, Settled } from '../outcome/recorded-outcome.js';
import { isLockTimeout } from '../driver/database-errors.js';
import { type LeasedClaim, LeaseStore } from './lease.store.js';
import { OperationRegistry } from './operation-registry.js';
import { OperationRunner, type RunEnding } from './operation.runner.js';
import { PHASED_CLAIM, type PhasedClaim } from './phased-claim.js';
import { operationName, type PhasedOperation } from './phased-operation.js';
import { LeaseLostError, type Ownership } from './phases.js';
import type { RequestFingerprint } from '../fingerprint/request-fingerprints.js';
import { ownerPollPause } from '../records/lock-wait.js';
import { IdempotencyExtensions, type PhasedRequest, type PhasedRouteFlow } from '../http/idempotency-extensions.js';

/** The settings of a route that the phased flow reads (`IdempotentRoute` has all of these). */
export interface PhasedRoute {
  operation: string;
  retention: number;
  wait: number;
  /** The lease of the route's claims, in ms: set, as the route is phased. */
  lease: number | undefined;
  retryAfterSeconds: number;
  /** The status a success answers with, and the headers it records. */
  successStatus: number;
  replayHeaders: readonly string[];
  /** The 4xx statuses recorded as the operation's outcome. */
  storeErrors: ReadonlySet<number>;
}

/** How long one claim may wait on a row lock: a concurrent first claim commits well within it. */
const CLAIM_LOCK_TIMEOUT_MS = 50;

/** One call of the phased flow: what its steps share. */
interface PhasedCall extends Omit<PhasedRequest, 'route'> {
  route: PhasedRoute;
  id: RecordId;
  fingerprint: RequestFingerprint;
  steps: FlowSteps;
}

/**
 * The request flow of a phased route: the claim commits first, under a
 * lease; the handler's operation commits phase by phase; the outcome is
 * recorded last, fenced by the owner token. A duplicate polls while the
 * lease is live, and takes the claim over once it lapses.
 */
@Injectable()
export class PhasedFlow implements PhasedRouteFlow {
  private readonly logger = new Logger('Idempotency');
  /** Routes already warned about a handler that reshapes its operation's answer. */
  private readonly reshapingRoutes = new Set<string>();

  constructor(
    private readonly leases: LeaseStore,
    private readonly runner: OperationRunner,
    private readonly operations: OperationRegistry,
    private readonly adapterHost: HttpAdapterHost,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedModuleOptions,
    extensions: IdempotencyExtensions,
  ) {
    extensions.registerPhasedFlow(this);
  }

  async execute(id: RecordId, fingerprint: RequestFingerprint, request: PhasedRequest): Promise<FlowEnding> {
    const steps: FlowSteps = { collided: false, timeline: {} };
    try {
      return { steps, settled: await this.settleRequest({ id, fingerprint, steps, ...request }) };
    } catch (error) {
      return { steps, error };
    }
  }

  /** Claims, runs and records; `steps` is this flow's own note of what it went through. */
  private async settleRequest({ id, fingerprint, route, next, request, response, steps }: PhasedCall): Promise<Settled> {
    const owner = randomUUID();
    const leaseMs = route.lease!;
    const claimStarted = performance.now();
    const claimed = await this.claimOrWait(id, fingerprint, route, owner, steps).finally(() => {
      steps.claimMs = performance.now() - claimStarted;
      steps.timeline.claim = { start: claimStarted, end: performance.now() };
    });
    if ('outcome' in claimed) return { outcome: claimed.outcome, replayed: true, expiresAt: claimed.expiresAt, databaseNow: claimed.databaseNow };
    if (claimed.tookOver) steps.tookOver = claimed.attempts > 1 ? 'lease' : 'expired';
    if (claimed.attempts > this.options.maxAttempts) {
      const outcome = operationFailedOutcome(`gave up after ${this.options.maxAttempts} attempts`);
      if (!(await this.leases.finish({ id, fingerprint: fingerprint.value }, owner, outcome, route.retention, 'attempts exhausted'))) throw new IdempotencyRequestInProgressException(route.retryAfterSeconds);
      return { outcome, replayed: false };
    }

    let running: Promise<RunEnding> | undefined;
    const phasedClaim: PhasedClaim = {
      run: <I, O>(operation: Type<PhasedOperation<I, O>>, input: I): Promise<O> => {
        if (running) return Promise.reject(new IdempotencyConfigurationError(`${route.operation}: claim.run() runs one operation per request.`));
        running = this.start(operation, input, route, { id, fingerprint: fingerprint.value, owner, leaseMs, claimedAt: claimed.run, results: claimed.phaseResults });
        return running.then((ending) => answerOf<O>(ending));
      },
    };
    request[PHASED_CLAIM] = phasedClaim;
    const handlerStarted = performance.now();
    let handled: { result: unknown } | { error: unknown };
    try {
      // No transaction is current here: the claim has committed, and each local phase opens its own.
      // A write outside a local phase (before run(), in an external phase) therefore joins nothing and
      // runs on the pool, committing on its own as outside a request, rather than join a closed
      // transaction; database writes belong in phases.local().
      handled = { result: await lastValueFrom(next.handle(), { defaultValue: undefined }) };
    } catch (error) {
      handled = { error };
    }
    // Once its input is stored, an operation has an ending; before, it never started, and nothing can have happened.
    const ending = await running?.catch(() => undefined);
    // The handler's step ends where the operation's outcome is written: that write is the commit step.
    const handlerEnded = ending?.recording?.start ?? performance.now();
    steps.handlerMs = handlerEnded - handlerStarted;
    steps.timeline.handler = { start: handlerStarted, end: handlerEnded };
    if (ending?.recording) steps.timeline.commit = ending.recording;
    if (ending) return this.settle(ending, handled, route);

    const record = { id, fingerprint: fingerprint.value };
    if ('result' in handled) return this.record(record, owner, captureSuccess(handled.result, route, this.adapterHost.httpAdapter, response), route, steps);
    const { error } = handled;
    if (error instanceof HttpException && route.storeErrors.has(error.getStatus())) return this.record(record, owner, captureError(error), route, steps);
    // The key is freed, as in a rollback.
    if (!(await this.leases.discardUnstarted(id, owner).catch(() => false))) await this.leases.release(id, owner).catch(() => undefined);
    throw error instanceof LeaseLostError ? new IdempotencyRequestInProgressException(route.retryAfterSeconds) : error;
  }

  /** Stores the input with the claim, then runs the operation to its ending. */
  private async start<I, O>(operation: Type<PhasedOperation<I, O>>, input: I, route: PhasedRoute, ownership: Omit<Ownership, 'signal'>): Promise<RunEnding> {
    const instance = this.operations.instanceOf(operation) as PhasedOperation<unknown, unknown>;
    const resume = await this.leases.saveResume(ownership.id, ownership.owner, {
      operation: operationName(operation),
      input,
      status: route.successStatus,
      storeErrors: [...route.storeErrors],
      retention: route.retention,
    });
    return resume ? this.runner.finish(instance, resume, ownership) : { kind: 'lost' };
  }

  /**
   * The answer is the operation's ending, whatever the handler did with
   * `run()`'s result: that is what a retry or the completer would record. An
   * operation that started and did not finish may still end (a retry
   * resumes it, or the completer does), so the client is told to retry the
   * same key.
   */
  private settle(ending: RunEnding, handled: { result: unknown } | { error: unknown }, route: PhasedRoute): Settled {
    if (ending.kind === 'lost') throw new IdempotencyRequestInProgressException(route.retryAfterSeconds);
    if (ending.kind === 'unfinished') {
      throw new IdempotencyOperationUnfinishedException(route.retryAfterSeconds, ending.error instanceof HttpException ? ending.error.message : undefined);
    }
    const reshaped = 'result' in handled ? handled.result !== ending.output || ending.error !== undefined : handled.error !== ending.error;
    if (reshaped && !this.reshapingRoutes.has(route.operation)) {
      this.reshapingRoutes.add(route.operation);
      this.logger.warn(
        `${route.operation}: the handler answered something other than what claim.run() settled with. A phased route answers its operation's response, ` +
          'whoever finishes it: return claim.run(...) as is, and shape the response in the operation\'s respond().',
      );
    }
    return { outcome: ending.outcome, replayed: false };
  }

  private async record(record: OutcomeRecord, owner: string, outcome: RecordedOutcome, route: PhasedRoute, steps: FlowSteps): Promise<Settled> {
    const commitStarted = performance.now();
    const finished = await this.leases.finish(record, owner, outcome, route.retention).finally(() => {
      steps.timeline.commit = { start: commitStarted, end: performance.now() };
    });
    if (!finished) throw new IdempotencyRequestInProgressException(route.retryAfterSeconds);
    return { outcome, replayed: false };
  }

  /**
   * Claims the key, or polls while a live owner holds it, for up to the
   * route's `wait`. A poll is one statement from the pool that never waits
   * on the owner's row lock for long, and no connection is held between
   * polls: a crowd of duplicates neither outlasts `wait` nor drains the pool.
   */
  private async claimOrWait(
    id: RecordId,
    fingerprint: RequestFingerprint,
    route: PhasedRoute,
    owner: string,
    steps: FlowSteps,
  ): Promise<{ outcome: RecordedOutcome; expiresAt: Date; databaseNow: Date } | Extract<LeasedClaim, { claimed: true }>> {
    const deadline = Date.now() + route.wait;
    for (let poll = 0; ; poll++) {
      const lockTimeoutMs = Math.min(CLAIM_LOCK_TIMEOUT_MS, deadline - Date.now());
      const claim = await this.leases.claim(id, fingerprint, { owner, leaseMs: route.lease!, retentionMs: route.retention, lockTimeoutMs }).catch((error: unknown) => {
        if (!isLockTimeout(error)) throw error;
        return { claimed: false, holder: undefined } as const; // a row lock held by an owner at work
      });
      if (claim.claimed) return claim;
      const holder = claim.holder;
      if (holder && !fingerprint.matches(holder.fingerprint)) throw new IdempotencyKeyReusedException();
      if (holder?.outcome) return { outcome: holder.outcome, expiresAt: holder.expiresAt, databaseNow: holder.databaseNow };
      if (!holder || holder.leaseLive) steps.collided = true; // it met an owner in flight
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw new IdempotencyRequestInProgressException(route.retryAfterSeconds);
      await sleep(ownerPollPause(poll, remaining));
    }
  }
}

/** What `claim.run()` resolves to, or rejects with, for the handler. */
function answerOf<O>(ending: RunEnding): O {
  if (ending.kind === 'lost') throw new LeaseLostError();
  if (ending.kind === 'unfinished') throw ending.error;
  if (ending.error) throw ending.error;
  return ending.output as O;
}
