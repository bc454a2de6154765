import { HttpException, Inject, Injectable } from '@nestjs/common';
import { performance } from 'node:perf_hooks';
import type { StepTiming } from '../events/idempotency-events.js';
import type { ResolvedModuleOptions } from '../options/idempotency.options.js';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../options/idempotency.tokens.js';
import { IdempotencyDataSource } from '../transactions/idempotency-data-source.js';
import { captureError, successOutcome } from '../outcome/outcome-capture.js';
import type { RecordedOutcome } from '../outcome/recorded-outcome.js';
import { IdempotencyTransactionHost } from '../transactions/transaction-host.js';
import type { ResumeInfo } from '../records/stored-record.js';
import { LeaseStore } from './lease.store.js';
import type { PhasedOperation } from './phased-operation.js';
import { LeaseLostError, type Ownership, Phases } from './phases.js';

/**
 * How one owner's run of an operation ended: its outcome recorded (a
 * success, or an error the route stores), unfinished (the lease is released
 * for a retry or the completer), or lost to another owner.
 */
export type RunEnding = (
  | { kind: 'recorded'; outcome: RecordedOutcome; output?: unknown; error?: HttpException }
  | { kind: 'unfinished'; error: unknown }
  | { kind: 'lost' }
) & {
  /** When the fenced write of the outcome ran, if it did. */
  recording?: StepTiming;
};

/**
 * Runs a phased operation for one owner, keeping its lease alive meanwhile
 * (the lease lapses only when the owner dies or hangs, not while it works),
 * and ends it. The request flow and the completer both end an operation
 * here, so whoever finishes it records the same status, headers and body.
 */
@Injectable()
export class OperationRunner {
  constructor(
    private readonly leases: LeaseStore,
    private readonly served: IdempotencyDataSource,
    private readonly transactions: IdempotencyTransactionHost,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedModuleOptions,
  ) {}

  /**
   * Runs the operation with the stored input and records how it ended.
   * Never rejects: a failure to record leaves it unfinished. When `stop`
   * aborts first, the operation's signal aborts too, its lease is released
   * and it ends unfinished at once, without waiting for an operation that
   * ignores its signal (which then holds a lease that is no longer renewed,
   * and loses the claim to the next owner).
   */
  async finish(operation: PhasedOperation<unknown, unknown>, resume: ResumeInfo, ownership: Omit<Ownership, 'signal'>, stop?: AbortSignal): Promise<RunEnding> {
    const { id, owner } = ownership;
    const retention = resume.retention ?? this.options.retention;
    let recorded: Extract<RunEnding, { kind: 'recorded' }>;
    try {
      const output = await this.run(operation, resume.input, ownership, stop);
      recorded = { kind: 'recorded', outcome: this.outcomeOf(operation, output, resume.status), output };
    } catch (error) {
      if (error instanceof LeaseLostError) return { kind: 'lost' };
      if (!(error instanceof HttpException) || !resume.storeErrors.includes(error.getStatus())) {
        await this.leases.release(id, owner).catch(() => undefined);
        return { kind: 'unfinished', error };
      }
      recorded = { kind: 'recorded', outcome: captureError(error), error };
    }
    const start = performance.now();
    try {
      const finished = await this.leases.finish(ownership, owner, recorded.outcome, retention);
      const recording = { start, end: performance.now() };
      return finished ? { ...recorded, recording } : { kind: 'lost', recording };
    } catch (error) {
      // Whether it was recorded is unknown: a retry replays it, or resumes and records it.
      return { kind: 'unfinished', error, recording: { start, end: performance.now() } };
    }
  }

  private async run(operation: PhasedOperation<unknown, unknown>, input: unknown, ownership: Omit<Ownership, 'signal'>, stop?: AbortSignal): Promise<unknown> {
    const aborted = new AbortController();
    const heartbeat = setInterval(() => {
      this.leases.renew(this.leases.pool, ownership.id, ownership.owner, ownership.leaseMs).then(
        (held) => held || aborted.abort(new LeaseLostError()),
        () => undefined, // a failed renewal is retried on the next beat; the lease still has time
      );
    }, Math.max(10, Math.floor(ownership.leaseMs / 3)));
    heartbeat.unref();
    let onStop = () => {};
    const stopped = new Promise<never>((_, reject) => {
      onStop = () => {
        aborted.abort(stop!.reason);
        reject(stop!.reason);
      };
    });
    stopped.catch(() => undefined);
    stop?.addEventListener('abort', onStop, { once: true });
    try {
      if (stop?.aborted) throw stop.reason;
      const running = operation.run(input, new Phases({ ...ownership, signal: aborted.signal }, this.leases, this.served.dataSource, this.transactions));
      if (!stop) return await running;
      running.catch(() => undefined); // once stopped, how it ends is nobody's to hear
      return await Promise.race([running, stopped]);
    } finally {
      clearInterval(heartbeat);
      stop?.removeEventListener('abort', onStop);
    }
  }

  /** The operation's answer (`respond()`, or its output as the body), as recorded. */
  private outcomeOf(operation: PhasedOperation<unknown, unknown>, output: unknown, status: number): RecordedOutcome {
    const response = operation.respond ? operation.respond(output) : { body: output };
    const headers = new Map(Object.entries(response.headers ?? {}).map(([name, value]) => [name.toLowerCase(), value]));
    return successOutcome(status, response.body, (name) => headers.get(name), { replayHeaders: this.options.replayHeaders });
  }
}
