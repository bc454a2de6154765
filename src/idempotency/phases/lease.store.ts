import { Injectable } from '@nestjs/common';
import { IdempotencyDataSource } from '../transactions/idempotency-data-source.js';
import { type LeaseClaimRow, LeaseStatements, type LeaseTerms, type Statement, type TakenOverRow } from '../records/record.statements.js';
import type { OutcomeRecord, RecordId, ResumeInfo, StoredRecord } from '../records/stored-record.js';
import { OutcomeCodec } from '../records/outcome-codec.js';
import { IdempotencyTables } from '../records/idempotency-tables.js';
import type { RecordedOutcome } from '../outcome/recorded-outcome.js';
import { IdempotencyTransactionHost } from '../transactions/transaction-host.js';
import type { RequestFingerprint } from '../fingerprint/request-fingerprints.js';

/** Something that runs SQL: the pool (autocommit) or a QueryRunner in a transaction. */
export interface Queryable {
  query(sql: string, parameters?: unknown[]): Promise<any>;
}

export type LeasedClaim =
  | { claimed: false; holder: HeldRecord | undefined }
  | { claimed: true; tookOver: boolean; attempts: number; phaseResults: Record<string, unknown>; run: string };

/** The record that holds a key: a claim, or a finished record that has not expired. */
export interface HeldRecord extends StoredRecord {
  leaseLive: boolean;
  /** The database's `now()` when the record was read. */
  databaseNow: Date;
}

export interface AbandonedClaim {
  /** The fingerprint of the request that claimed the key: the outcome recorded for it is bound to it. */
  fingerprint: string;
  resume: ResumeInfo | null;
  /** Which run of the key this is: the instant its record was claimed. */
  run: string;
  phaseResults: Record<string, unknown>;
  attempts: number;
  recoveryPoint: string | null;
}

const run = <Row>(on: Queryable, { text, values }: Statement): Promise<Row[]> => on.query(text, values);

/**
 * Phased operations' leases on their records (`LeaseStatements` holds the
 * SQL and why it is written so). Every write after the claim is fenced by
 * the owner token, and returns false once the owner lost the claim.
 */
@Injectable()
export class LeaseStore {
  /**
   * The served DataSource's pool, outside any request's transaction: each
   * statement commits on its own, at READ COMMITTED, the level the leases'
   * statements are written for (see `LeaseStatements`). On connections that
   * run their statements at another level (a database whose
   * `default_transaction_isolation` is stricter) each goes in a READ
   * COMMITTED transaction of its own: at SERIALIZABLE their reads of one key
   * would lock others' and fail them, and at REPEATABLE READ a claim that
   * waited would fail on the row an owner committed meanwhile.
   */
  readonly pool: Queryable = {
    query: (sql, parameters) => this.transactions.outside(() => this.atReadCommitted(sql, parameters)),
  };

  constructor(
    private readonly served: IdempotencyDataSource,
    private readonly tables: IdempotencyTables,
    private readonly transactions: IdempotencyTransactionHost,
    private readonly outcomes: OutcomeCodec,
  ) {}

  private atReadCommitted(sql: string, parameters?: unknown[]): Promise<any> {
    const dataSource = this.served.dataSource;
    if (this.served.statementIsolation === 'READ COMMITTED') return dataSource.query(sql, parameters);
    return dataSource.transaction('READ COMMITTED', (manager) => manager.query(sql, parameters));
  }

  private get statements(): LeaseStatements {
    return this.tables.of(LeaseStatements);
  }

  /**
   * Claims the key with a lease, in a statement of its own (so it commits at
   * once), or returns the record that holds it, never waiting on a live owner.
   * A lapsed lease is taken over by the same request only, under whichever
   * listed key (or none) its fingerprint was written.
   */
  async claim(id: RecordId, fingerprint: RequestFingerprint, lease: LeaseTerms): Promise<LeasedClaim> {
    const statement = this.statements.claim(id, { written: fingerprint.value, accepted: fingerprint.accepted() }, lease);
    const [row] = await run<LeaseClaimRow>(this.pool, statement);
    if (row?.claimed) return { claimed: true, tookOver: row.took_over, attempts: row.attempts, phaseResults: row.phase_results, run: row.run };
    // No row: the key is held by a claim this statement's snapshot could not see yet.
    return { claimed: false, holder: row && { ...this.outcomes.storedRecord(row, id), leaseLive: row.lease_live, databaseNow: row.database_now } };
  }

  /** The completer's takeover of an abandoned claim: of several reapers exactly one wins. */
  async takeOver(id: RecordId, staleOwner: string | null, owner: string, leaseMs: number): Promise<AbandonedClaim | undefined> {
    const [row] = await run<TakenOverRow>(this.pool, this.statements.takeOver(id, staleOwner, owner, leaseMs));
    if (!row) return undefined;
    return { fingerprint: row.fingerprint, resume: row.resume, run: row.run, phaseResults: row.phase_results, attempts: row.attempts, recoveryPoint: row.recovery_point };
  }

  /** Deletes a claim that never started its operation: no side effect can exist, so the key is simply free again. */
  async discardUnstarted(id: RecordId, owner: string): Promise<boolean> {
    return (await run(this.pool, this.statements.discardUnstarted(id, owner))).length === 1;
  }

  /** Extends the lease; false when `owner` no longer holds it. Inside a transaction it also locks the record. */
  async renew(on: Queryable, id: RecordId, owner: string, leaseMs: number): Promise<boolean> {
    return (await run(on, this.statements.renew(id, owner, leaseMs))).length === 1;
  }

  /** Records a finished phase as the new recovery point. */
  async savePhase(on: Queryable, { id, owner, leaseMs }: { id: RecordId; owner: string; leaseMs: number }, phase: string, resultJson: string): Promise<boolean> {
    return (await run(on, this.statements.savePhase(id, owner, phase, resultJson, leaseMs))).length === 1;
  }

  /**
   * Stores what the reaper needs to resume the operation without a client,
   * once per run: returns what is stored (an earlier owner's, if any), or
   * undefined when `owner` no longer holds the claim.
   */
  async saveResume(id: RecordId, owner: string, resume: ResumeInfo): Promise<ResumeInfo | undefined> {
    const [row] = await run<{ resume: ResumeInfo }>(this.pool, this.statements.saveResume(id, owner, resume));
    return row?.resume;
  }

  /** Lets the lease lapse now, so that a retry resumes at once. */
  async release(id: RecordId, owner: string): Promise<boolean> {
    return (await run(this.pool, this.statements.release(id, owner))).length === 1;
  }

  /**
   * Records the outcome (sealed, under `encryption`); `failed` with a reason for an operation that cannot be completed.
   * The statement sets the expiry, so a sealed outcome is bound to the record's fingerprint but not to its expiry.
   */
  async finish(record: OutcomeRecord, owner: string, outcome: RecordedOutcome, retentionMs: number, failureReason?: string): Promise<boolean> {
    const statement = this.statements.finish(record.id, owner, this.outcomes.encode(record, outcome), retentionMs, failureReason);
    return (await run(this.pool, statement)).length === 1;
  }
}
