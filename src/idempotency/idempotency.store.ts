import { Injectable } from '@nestjs/common';
import { DataSource, type QueryRunner } from 'typeorm';
import type { IdempotencyRecordStatus } from './idempotency-record.entity.js';
import type { RecordedOutcome } from './recorded-outcome.js';

/** What makes a key unique: the tenant scope, the operation and the key itself. */
export interface RecordId {
  scope: string;
  operation: string;
  key: string;
}

/** The part of a record the request flow reads. */
export interface StoredRecord {
  fingerprint: string;
  status: IdempotencyRecordStatus;
  outcome: RecordedOutcome | null;
}

export interface Claim {
  /** The key was free, or held by an expired record, and is now this transaction's. */
  claimed: boolean;
  /** An expired record was overwritten. */
  tookOver: boolean;
}

export const RECORD_COLUMNS = 'fingerprint, status, response_status, response_headers, response_body';

/**
 * The SQL of `idempotency_records`. The claim waits on a concurrent owner's
 * uncommitted row for at most `lock_timeout`, set in the same statement.
 */
@Injectable()
export class IdempotencyStore {
  constructor(private readonly dataSource: DataSource) {}

  /** Reads an unexpired record from the pool, outside any transaction. */
  async findLive(id: RecordId): Promise<StoredRecord | undefined> {
    const rows = await this.dataSource.query(
      `SELECT ${RECORD_COLUMNS} FROM idempotency_records
        WHERE scope = $1 AND operation = $2 AND key = $3 AND expires_at > now()`,
      [id.scope, id.operation, id.key],
    );
    return rows.length ? toStoredRecord(rows[0]) : undefined;
  }

  /**
   * Inserts an in-progress record, or takes over an expired, finished one
   * (an expired phased claim is the completer's to resolve). A concurrent
   * owner's uncommitted row makes this wait up to `waitMs`, then fail with
   * SQLSTATE 55P03. The existing row stays locked until the transaction ends.
   */
  async claim(runner: QueryRunner, id: RecordId, fingerprint: string, retentionMs: number, waitMs: number): Promise<Claim> {
    const rows: Array<{ took_over: boolean }> = await runner.query(
      `INSERT INTO idempotency_records AS r (scope, operation, key, fingerprint, status, created_at, expires_at)
       SELECT $1, $2, $3, $4, 'in_progress', now(), now() + $5 * interval '1 millisecond'
         FROM (SELECT set_config('lock_timeout', $6, true)) AS wait
       ON CONFLICT (scope, operation, key) DO UPDATE
         SET fingerprint = EXCLUDED.fingerprint, status = 'in_progress', response_status = NULL,
             response_headers = NULL, response_body = NULL, created_at = EXCLUDED.created_at,
             completed_at = NULL, expires_at = EXCLUDED.expires_at
         WHERE r.expires_at <= now() AND r.status <> 'in_progress'
       RETURNING (xmax <> 0) AS took_over`,
      [id.scope, id.operation, id.key, fingerprint, retentionMs, `${Math.max(1, waitMs)}ms`],
    );
    return { claimed: rows.length === 1, tookOver: rows[0]?.took_over ?? false };
  }

  /** Reads the record a failed claim ran into; the claim left it locked. */
  async findClaimed(runner: QueryRunner, id: RecordId): Promise<StoredRecord | undefined> {
    const rows = await runner.query(`SELECT ${RECORD_COLUMNS} FROM idempotency_records WHERE scope = $1 AND operation = $2 AND key = $3`, [
      id.scope,
      id.operation,
      id.key,
    ]);
    return rows.length ? toStoredRecord(rows[0]) : undefined;
  }

  /** Records the outcome in the claim's transaction. */
  async complete(runner: QueryRunner, id: RecordId, outcome: RecordedOutcome): Promise<void> {
    await runner.query(
      `UPDATE idempotency_records
          SET status = 'completed', response_status = $4, response_headers = $5, response_body = $6, completed_at = now()
        WHERE scope = $1 AND operation = $2 AND key = $3`,
      [id.scope, id.operation, id.key, outcome.status, JSON.stringify(outcome.headers), outcome.body],
    );
  }
}

export interface RecordRow {
  fingerprint: string;
  status: IdempotencyRecordStatus;
  response_status: number | null;
  response_headers: Record<string, string> | null;
  response_body: string | null;
}

export function toStoredRecord(row: RecordRow): StoredRecord {
  const outcome =
    row.status !== 'in_progress' && row.response_status !== null
      ? { status: row.response_status, headers: row.response_headers ?? {}, body: row.response_body }
      : null;
  return { fingerprint: row.fingerprint, status: row.status, outcome };
}
