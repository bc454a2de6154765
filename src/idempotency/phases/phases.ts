import { createHash } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { CurrentOperation } from '../transactions/current-operation.js';
import type { RecordId } from '../records/stored-record.js';
import type { IdempotencyTransactionHost } from '../transactions/transaction-host.js';
import { ownQueryRunner } from '../transactions/transaction-join.js';
import type { LeaseStore } from './lease.store.js';

/** The claim was taken over by another owner: this one must stop without writing. */
export class LeaseLostError extends Error {
  constructor() {
    super('The lease of this idempotent operation was taken over by another owner');
    this.name = 'LeaseLostError';
  }
}

/** One run of a key: a new claim after expiry starts another. */
export interface RunId extends RecordId {
  /** When the run's record was claimed: ISO 8601 in UTC, to the microsecond. Kept across owners. */
  claimedAt: string;
}

/** One owner's hold on a phased claim. */
export interface Ownership {
  id: RecordId;
  /** The fingerprint of the request that claimed the run: its outcome is recorded for that request. */
  fingerprint: string;
  /** The run this owner continues: its downstream keys are the run's. */
  claimedAt: string;
  owner: string;
  leaseMs: number;
  /** Results of phases already finished, by name (from earlier owners too). */
  results: Record<string, unknown>;
  /** Aborted when the lease is lost. */
  signal: AbortSignal;
}

/**
 * What a phased operation runs its phases with. A finished phase returns its
 * stored result and does not run again; results are JSON, so return plain
 * data. Every write is fenced by the owner token.
 */
export class Phases {
  constructor(
    private readonly ownership: Ownership,
    private readonly leases: LeaseStore,
    private readonly dataSource: DataSource,
    private readonly transactions: IdempotencyTransactionHost,
  ) {}

  /** Aborted when this owner loses the lease, or the reaper stops it; pass it to long calls. */
  get signal(): AbortSignal {
    return this.ownership.signal;
  }

  /**
   * Runs database work in a transaction of its own, which also advances the
   * recovery point and stores the result: both commit, or neither. Inside
   * `work`, `IdempotencyTransactionHost.manager` is that transaction, and writes through
   * injected repositories and the DataSource join it.
   */
  async local<T>(phase: string, work: () => Promise<T>): Promise<T> {
    if (phase in this.ownership.results) return this.ownership.results[phase] as T;
    this.ownership.signal.throwIfAborted(); // a stopped owner starts no new phase
    const { id, owner, leaseMs } = this.ownership;
    const runner = ownQueryRunner(this.dataSource);
    try {
      await runner.connect();
      await runner.startTransaction('READ COMMITTED');
      // Fencing first: it locks the record, so no takeover can slip in before this phase commits.
      if (!(await this.leases.renew(runner, id, owner, leaseMs))) throw new LeaseLostError();
      const resultJson = toJson(await CurrentOperation.run(id, () => this.transactions.run(runner.manager, work), { phase }));
      await this.leases.savePhase(runner, this.ownership, phase, resultJson);
      await runner.commitTransaction();
      return this.remember(phase, resultJson);
    } catch (error) {
      if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
      throw error;
    } finally {
      await runner.release();
    }
  }

  /**
   * Calls an external service with a downstream idempotency key derived from
   * the run (scope, operation, key, claim instant) and the phase: a repeat of
   * the call in the same run, after a crash, a failure or a takeover, carries
   * the same key, so the service deduplicates it; a new run of the key after
   * its record expired gets new keys. No transaction is open during the
   * call: database writes made in it commit on their own.
   */
  async external<T>(phase: string, call: (downstreamKey: string, signal: AbortSignal) => Promise<T>): Promise<T> {
    if (phase in this.ownership.results) return this.ownership.results[phase] as T;
    this.ownership.signal.throwIfAborted();
    const { id, owner, leaseMs, signal, claimedAt } = this.ownership;
    if (!(await this.leases.renew(this.leases.pool, id, owner, leaseMs))) throw new LeaseLostError();
    const resultJson = toJson(await call(downstreamKey({ ...id, claimedAt }, phase), signal));
    if (!(await this.leases.savePhase(this.leases.pool, this.ownership, phase, resultJson))) throw new LeaseLostError();
    return this.remember(phase, resultJson);
  }

  /** Hands back the stored form, so a first run and a resumed one see the same values. */
  private remember<T>(phase: string, resultJson: string): T {
    const result = JSON.parse(resultJson) as T;
    this.ownership.results[phase] = result;
    return result;
  }
}

/**
 * The downstream idempotency key of an external phase: SHA-256 hex of the
 * JSON array [scope, operation, key, claimedAt, phase]. The same for every
 * owner of one run; different for each run of a key.
 */
export function downstreamKey(run: RunId, phase: string): string {
  return createHash('sha256').update(JSON.stringify([run.scope, run.operation, run.key, run.claimedAt, phase])).digest('hex');
}

function toJson(value: unknown): string {
  return JSON.stringify(value ?? null);
}
