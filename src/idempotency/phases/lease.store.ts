import { Injectable } from '@nestjs/common';
import { IdempotencyDataSource } from '../idempotency-data-source.js';
import { RECORD_COLUMNS, type RecordId, type RecordRow, type StoredRecord, toStoredRecord } from '../idempotency.store.js';
import { OutcomeCodec } from '../outcome-codec.js';
import type { RecordedOutcome } from '../recorded-outcome.js';
import { TransactionHost } from '../transaction-host.js';

/** Something that runs SQL: the pool (autocommit) or a QueryRunner in a transaction. */
export interface Queryable {
  query(sql: string, parameters?: unknown[]): Promise<any>;
}

/** What a phased operation needs to be finished by someone other than its first owner. */
export interface ResumeInfo {
  operation: string;
  input: unknown;
  /** The route's success status and recordable error statuses. */
  status: number;
  storeErrors: number[];
  /** The route's retention, in ms; the module's for claims stored without it. */
  retention?: number;
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

type ClaimRow = RecordRow & {
  claimed: boolean;
  took_over: boolean;
  attempts: number;
  phase_results: Record<string, unknown>;
  run: string;
  lease_live: boolean;
  database_now: Date;
};

export interface AbandonedClaim {
  resume: ResumeInfo | null;
  /** Which run of the key this is: see `RUN`. */
  run: string;
  phaseResults: Record<string, unknown>;
  attempts: number;
  recoveryPoint: string | null;
}

const PK = 'scope = $1 AND operation = $2 AND key = $3';
/**
 * The identity of a run of a key: the instant its record was claimed
 * (`created_at`, to the microsecond, in UTC). A lease takeover keeps it; a
 * claim of an expired record starts a new run, with a later instant.
 */
const RUN = `to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
const ms = (parameter: string) => `${parameter} * interval '1 millisecond'`;

/**
 * The SQL of phased operations. Every write after the claim is fenced by
 * `owner_token = $owner`: a stale owner that wakes up after a takeover
 * matches no row, so it can never overwrite the new owner's work.
 */
@Injectable()
export class LeaseStore {
  /** The served DataSource's pool, outside any request's transaction: each statement commits on its own. */
  readonly pool: Queryable = {
    query: (sql, parameters) => this.transactions.outside(() => this.served.dataSource.query(sql, parameters)),
  };

  constructor(
    private readonly served: IdempotencyDataSource,
    private readonly transactions: TransactionHost,
    private readonly outcomes: OutcomeCodec,
  ) {}

  /**
   * Claims the key with a lease, in a statement of its own (so it commits at
   * once). An expired finished record starts over; an in-progress one whose
   * lease lapsed is taken over with its recovery point and phase results.
   *
   * A key that is held is never waited on: the statement reads the record
   * first and attempts the claim only when the key is free or claimable, so a
   * duplicate of a live owner (whose local phase may hold the record's row
   * lock for as long as the phase runs) gets the holder's record back at
   * once. The attempt itself waits at most `lockTimeoutMs` on a row lock
   * (SQLSTATE 55P03 after that).
   */
  async claim(id: RecordId, fingerprint: string, retentionMs: number, leaseMs: number, owner: string, lockTimeoutMs: number): Promise<LeasedClaim> {
    const rows: ClaimRow[] = await this.pool.query(
      `WITH wait AS MATERIALIZED (SELECT set_config('lock_timeout', $8, true)),
       held AS (
         SELECT ${RECORD_COLUMNS}, coalesce(lease_expires_at > now(), false) AS lease_live,
                (status <> 'in_progress' AND expires_at <= now())
                  OR (status = 'in_progress' AND lease_expires_at <= now() AND fingerprint = $4) AS claimable
           FROM idempotency_records WHERE ${PK}),
       claim AS (
         INSERT INTO idempotency_records AS r
                (scope, operation, key, fingerprint, status, created_at, expires_at, owner_token, lease_expires_at)
         SELECT $1, $2, $3, $4, 'in_progress', now(), now() + ${ms('$5')}, $6, now() + ${ms('$7')}
           FROM wait WHERE NOT EXISTS (SELECT 1 FROM held WHERE NOT claimable)
         ON CONFLICT (scope, operation, key) DO UPDATE SET
           owner_token = EXCLUDED.owner_token,
           lease_expires_at = EXCLUDED.lease_expires_at,
           attempts = CASE WHEN r.status = 'in_progress' THEN r.attempts + 1 ELSE 1 END,
           phase_results = CASE WHEN r.status = 'in_progress' THEN r.phase_results ELSE '{}' END,
           recovery_point = CASE WHEN r.status = 'in_progress' THEN r.recovery_point END,
           resume = CASE WHEN r.status = 'in_progress' THEN r.resume END,
           created_at = CASE WHEN r.status = 'in_progress' THEN r.created_at ELSE EXCLUDED.created_at END,
           expires_at = CASE WHEN r.status = 'in_progress' THEN r.expires_at ELSE EXCLUDED.expires_at END,
           fingerprint = EXCLUDED.fingerprint, status = 'in_progress', response_status = NULL, response_headers = NULL,
           response_body = NULL, completed_at = NULL, failure_reason = NULL
         WHERE (r.status <> 'in_progress' AND r.expires_at <= now())
            OR (r.status = 'in_progress' AND r.lease_expires_at <= now() AND r.fingerprint = EXCLUDED.fingerprint)
         RETURNING (xmax <> 0) AS took_over, attempts, phase_results, ${RUN} AS run)
       SELECT true AS claimed, took_over, attempts, phase_results, run,
              NULL AS fingerprint, NULL AS status, NULL::smallint AS response_status, NULL::jsonb AS response_headers,
              NULL AS response_body, NULL::timestamptz AS expires_at, NULL::boolean AS lease_live, NULL::timestamptz AS database_now
         FROM claim
       UNION ALL
       SELECT false, NULL, NULL, NULL, NULL, ${RECORD_COLUMNS}, lease_live, now()
         FROM held WHERE NOT EXISTS (SELECT 1 FROM claim) AND (status = 'in_progress' OR expires_at > now())`,
      [id.scope, id.operation, id.key, fingerprint, retentionMs, owner, leaseMs, `${Math.max(1, Math.ceil(lockTimeoutMs))}ms`],
    );
    const [row] = rows;
    if (row?.claimed) return { claimed: true, tookOver: row.took_over, attempts: row.attempts, phaseResults: row.phase_results, run: row.run };
    // No row: the key is held by a claim this statement's snapshot could not see yet (an expired record is never a holder).
    return { claimed: false, holder: row && { ...toStoredRecord(row, id, this.outcomes), leaseLive: row.lease_live, databaseNow: row.database_now } };
  }

  /**
   * The completer's takeover of an abandoned claim: a compare-and-set on the
   * owner token, so of several reapers exactly one wins. A record whose row
   * is locked (an owner's local phase is committing) is skipped, not waited on.
   */
  async takeOver(id: RecordId, staleOwner: string | null, owner: string, leaseMs: number): Promise<AbandonedClaim | undefined> {
    const rows: Array<{ resume: ResumeInfo | null; phase_results: Record<string, unknown>; attempts: number; recovery_point: string | null; run: string }> =
      await this.pool.query(
        `WITH free AS (
           SELECT ctid FROM idempotency_records
            WHERE ${PK} AND status = 'in_progress' AND lease_expires_at <= now() AND owner_token IS NOT DISTINCT FROM $4
            FOR UPDATE SKIP LOCKED),
         taken AS (
           UPDATE idempotency_records SET owner_token = $5, lease_expires_at = now() + ${ms('$6')}, attempts = attempts + 1
            WHERE ctid IN (SELECT ctid FROM free)
            RETURNING resume, phase_results, attempts, recovery_point, ${RUN} AS run)
         SELECT * FROM taken`,
        [id.scope, id.operation, id.key, staleOwner, owner, leaseMs],
      );
    if (!rows.length) return undefined;
    const [row] = rows;
    return { resume: row.resume, run: row.run, phaseResults: row.phase_results, attempts: row.attempts, recoveryPoint: row.recovery_point };
  }

  /** Deletes a claim that never started its operation: no side effect can exist, so the key is simply free again. */
  async discardUnstarted(id: RecordId, owner: string): Promise<boolean> {
    const rows: unknown[] = await this.pool.query(
      `WITH gone AS (DELETE FROM idempotency_records WHERE ${PK} AND owner_token = $4 AND status = 'in_progress' AND resume IS NULL RETURNING 1)
       SELECT 1 FROM gone`,
      [id.scope, id.operation, id.key, owner],
    );
    return rows.length === 1;
  }

  /** Extends the lease; false when `owner` no longer holds it. Inside a transaction it also locks the record. */
  async renew(on: Queryable, id: RecordId, owner: string, leaseMs: number): Promise<boolean> {
    return this.fenced(on, `lease_expires_at = now() + ${ms('$5')}`, id, owner, [leaseMs]);
  }

  /** Records a finished phase as the new recovery point. */
  async savePhase(on: Queryable, id: RecordId, owner: string, phase: string, resultJson: string, leaseMs: number): Promise<boolean> {
    return this.fenced(
      on,
      `phase_results = phase_results || jsonb_build_object($5::text, $6::jsonb), recovery_point = $5, lease_expires_at = now() + ${ms('$7')}`,
      id,
      owner,
      [phase, resultJson, leaseMs],
    );
  }

  /**
   * Stores what the reaper needs to resume the operation without a client,
   * once per run: returns what is stored (an earlier owner's, if any), or
   * undefined when `owner` no longer holds the claim.
   */
  async saveResume(id: RecordId, owner: string, resume: ResumeInfo): Promise<ResumeInfo | undefined> {
    const rows: Array<{ resume: ResumeInfo }> = await this.pool.query(
      `WITH fenced AS (
         UPDATE idempotency_records SET resume = coalesce(resume, $5::jsonb)
          WHERE ${PK} AND owner_token = $4 AND status = 'in_progress' RETURNING resume)
       SELECT resume FROM fenced`,
      [id.scope, id.operation, id.key, owner, JSON.stringify(resume)],
    );
    return rows[0]?.resume;
  }

  /** Lets the lease lapse now, so that a retry resumes at once. */
  async release(id: RecordId, owner: string): Promise<boolean> {
    return this.fenced(this.pool, `lease_expires_at = now()`, id, owner, []);
  }

  /** Records the outcome (sealed, under `encryption`); `failed` with a reason for an operation that cannot be completed. */
  async finish(id: RecordId, owner: string, outcome: RecordedOutcome, retentionMs: number, failureReason?: string): Promise<boolean> {
    const encoded = this.outcomes.encode(id, outcome);
    return this.fenced(
      this.pool,
      `status = $5, response_status = $6, response_headers = $7, response_body = $8, failure_reason = $9,
       completed_at = now(), expires_at = now() + ${ms('$10')}, owner_token = NULL, lease_expires_at = NULL`,
      id,
      owner,
      [failureReason ? 'failed' : 'completed', encoded.status, encoded.headers, encoded.body, failureReason ?? null, retentionMs],
    );
  }

  private async fenced(on: Queryable, assignments: string, id: RecordId, owner: string, extra: unknown[]): Promise<boolean> {
    const rows: unknown[] = await on.query(
      `WITH fenced AS (
         UPDATE idempotency_records SET ${assignments}
          WHERE ${PK} AND owner_token = $4 AND status = 'in_progress' RETURNING 1)
       SELECT 1 FROM fenced`,
      [id.scope, id.operation, id.key, owner, ...extra],
    );
    return rows.length === 1;
  }
}
