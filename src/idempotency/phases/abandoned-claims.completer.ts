import { Inject, Injectable, Logger } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { hashKey, IdempotencyEvents, type LeaseExpiredEvent } from '../events/idempotency-events.js';
import { IdempotencyDataSource } from '../transactions/idempotency-data-source.js';
import { operationFailedOutcome } from '../errors/idempotency.exceptions.js';
import type { ResolvedModuleOptions } from '../options/idempotency.options.js';
import { type AbandonedRow, LeaseStatements } from '../records/record.statements.js';
import type { RecordId } from '../records/stored-record.js';
import { IdempotencyTables } from '../records/idempotency-tables.js';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../options/idempotency.tokens.js';
import { IdempotencyTransactionHost } from '../transactions/transaction-host.js';
import { type AbandonedClaim, LeaseStore } from './lease.store.js';
import { OperationRegistry } from './operation-registry.js';
import { OperationRunner } from './operation.runner.js';
import { IdempotencyReaper } from '../reaper/idempotency.reaper.js';

/** What bounds one run of the completer. */
export interface CompleterBounds {
  /** No takeover after this instant (ms since the epoch); the operation resumed then is stopped. Default none. */
  until?: number;
  /** Stops the completer as `until` does, e.g. at shutdown. */
  signal?: AbortSignal;
  /** Claims looked at, at most. Default 100. */
  limit?: number;
}

/** What one pass of the completer did with the abandoned claims it found. */
export interface CompleterPass {
  /** Operations resumed and recorded. */
  completed: number;
  /** Operations that ran out of attempts and were marked failed. */
  failed: number;
  /** Claims whose operation never started, deleted. */
  discarded: number;
  /** Claims given back without a result, for a later pass or a retry. */
  released: number;
}

/**
 * Finishes phased operations whose owner died: takes each abandoned claim
 * over (fencing the old owner), resumes its operation from the recovery
 * point with the stored input, and records the outcome. A claim whose
 * operation never started is discarded; one that runs out of attempts is
 * marked failed. A started operation this process does not register is left
 * alone, with a warning, for a process that does. It never deletes a claim
 * whose side effects may exist. It joins every scheduled pass of the reaper.
 */
@Injectable()
export class AbandonedClaimsCompleter {
  private readonly logger = new Logger('Idempotency');

  constructor(
    private readonly served: IdempotencyDataSource,
    private readonly tables: IdempotencyTables,
    private readonly transactions: IdempotencyTransactionHost,
    private readonly leases: LeaseStore,
    private readonly runner: OperationRunner,
    private readonly operations: OperationRegistry,
    private readonly events: IdempotencyEvents,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedModuleOptions,
    reaper: IdempotencyReaper,
  ) {
    reaper.addCompleter(this);
  }

  /**
   * Takes abandoned claims over one after another and ends each. With
   * `until` (a time in ms since the epoch), it takes no claim over after
   * that instant and stops the operation it is resuming then, which is
   * released for a later pass; `signal` stops it the same way. It runs
   * outside any request's transaction.
   */
  completeAbandoned(bounds: CompleterBounds = {}): Promise<CompleterPass> {
    return this.transactions.outside(() => this.completePass(bounds));
  }

  private async completePass({ until, signal, limit = 100 }: CompleterBounds): Promise<CompleterPass> {
    const pass: CompleterPass = { completed: 0, failed: 0, discarded: 0, released: 0 };
    const stop = new AbortController();
    const timer = until === undefined ? undefined : setTimeout(() => stop.abort(new Error('the reaper pass ran out of time')), Math.max(0, until - Date.now()));
    const onSignal = () => stop.abort(signal!.reason);
    if (signal?.aborted) onSignal();
    else signal?.addEventListener('abort', onSignal, { once: true });
    try {
      const { text, values } = this.tables.of(LeaseStatements).abandoned(limit);
      const candidates: AbandonedRow[] = stop.signal.aborted ? [] : await this.served.dataSource.query(text, values);
      const unknown = new Set<string>();
      for (const { owner_token, resumes, ...id } of candidates) {
        if (stop.signal.aborted) break;
        // A started operation this process does not register is left to one that does (an API instance beside
        // a worker, say): its effects may exist, so failing it here would tell every retry they do not.
        if (resumes !== null && !this.operations.get(resumes)) {
          unknown.add(resumes);
          continue;
        }
        const owner = randomUUID();
        const claim = await this.leases.takeOver(id, owner_token, owner, this.options.lease);
        if (!claim) continue;
        const { result, reason } = await this.resolve(id, owner, claim, stop.signal);
        pass[result]++;
        this.events.emit({ kind: 'lease_expired', operation: id.operation, keyHash: hashKey(id), result, reason });
      }
      if (unknown.size > 0) {
        this.logger.warn(`Abandoned phased operations wait for a process that registers ${[...unknown].map((name) => `"${name}"`).join(', ')}: this one does not.`);
      }
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onSignal);
    }
    return pass;
  }

  /** Ends one claim this completer took over: discarded, marked failed, or its operation resumed to its ending. */
  private async resolve(id: RecordId, owner: string, claim: AbandonedClaim, stop: AbortSignal): Promise<Pick<LeaseExpiredEvent, 'result' | 'reason'>> {
    if (!claim.resume) return { result: (await this.leases.discardUnstarted(id, owner)) ? 'discarded' : 'released' };
    // Registered: the pass picks only operations this process knows, and the registry never shrinks.
    const handler = this.operations.get(claim.resume.operation)!;
    if (claim.attempts > this.options.maxAttempts) {
      const giveUp = `gave up after ${this.options.maxAttempts} attempts at recovery point ${claim.recoveryPoint ?? '(start)'}`;
      await this.leases.finish({ id, fingerprint: claim.fingerprint }, owner, operationFailedOutcome(giveUp), claim.resume.retention ?? this.options.retention, giveUp);
      return { result: 'failed', reason: giveUp };
    }
    const ownership = { id, fingerprint: claim.fingerprint, owner, leaseMs: this.options.lease, claimedAt: claim.run, results: claim.phaseResults };
    const ending = await this.runner.finish(handler, claim.resume, ownership, stop);
    if (ending.kind === 'recorded') return { result: 'completed' };
    if (ending.kind === 'lost') return { result: 'released', reason: 'another owner took the claim over' };
    return { result: 'released', reason: `resuming failed, to be retried: ${(ending.error as Error)?.message}` };
  }
}
