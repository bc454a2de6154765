import type { PreparedStatement } from './claim-transaction.js';
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
  expiresAt: Date;
}

export const RECORD_COLUMNS = 'fingerprint, status, response_status, response_headers, response_body, expires_at';

export interface RecordRow {
  fingerprint: string;
  status: IdempotencyRecordStatus;
  response_status: number | null;
  /** Plaintext records: the headers. Sealed ones (encryption at rest): NULL, the headers are in the body's envelope. */
  response_headers: Record<string, string> | null;
  /** Plaintext records: the exact body text. Sealed ones: the envelope of headers and body. */
  response_body: string | null;
  expires_at: Date;
}

/** The columns of a recorded outcome, as read. */
export interface OutcomeColumns {
  response_status: number;
  response_headers: Record<string, string> | null;
  response_body: string | null;
}

/**
 * An outcome as its columns store it, made only by `OutcomeCodec.encode`:
 * sealed when encryption is on. Statements that record an outcome take this,
 * never a RecordedOutcome, so none can write one around the codec.
 */
export type EncodedOutcome = {
  readonly status: number;
  /** JSON text of the headers; null when sealed. */
  readonly headers: string | null;
  readonly body: string | null;
} & { readonly __encodedBy: 'OutcomeCodec' };

/** Reads a recorded outcome back (`OutcomeCodec`): decrypts it, or throws when it must not be replayed. */
export interface OutcomeDecoder {
  decode(id: RecordId, columns: OutcomeColumns): RecordedOutcome;
}

/** The claim's one row: the claim itself, the live record that holds the key, or neither (`claimed` null). */
export interface ClaimRow extends Partial<RecordRow> {
  claimed: boolean | null;
  took_over: boolean | null;
  /** The database's `now()`, the instant `expires_at` is measured from. */
  database_now: Date;
}

/** A live record, with the database's `now()` at which it was read. */
export interface LiveRecordRow extends RecordRow {
  database_now: Date;
}

/**
 * The SQL of the one-transaction flow, as named prepared statements.
 *
 * The claim inserts an in-progress record, or takes over an expired,
 * finished one (an expired phased claim is the completer's to resolve). A
 * concurrent owner's uncommitted row makes it wait, up to `lock_timeout`,
 * then fail with SQLSTATE 55P03. The same statement sets that timeout for
 * its own wait and restores the connection's own afterwards, so the
 * handler's statements run under the timeout they would have without the
 * module, and no statement is added for it.
 *
 * When the key is held, the claim returns the record, if this statement's
 * snapshot can see it live. A record committed while the claim waited on its
 * row (a first execution, or a takeover of an expired record) is newer than
 * that snapshot, which may still hold the row's expired version: expired
 * versions are never returned, and a second look (`readRecord`) finds what
 * the owner committed. Expiry is always the database's clock.
 */
export const IdempotencyStatements = {
  claim(id: RecordId, fingerprint: string, retentionMs: number, waitMs: number): PreparedStatement {
    return {
      name: 'idempotency.claim',
      text: takeKeyText({ status: `'in_progress'`, outcome: ['NULL::smallint', 'NULL::jsonb', 'NULL::text'], completedAt: 'NULL::timestamptz' }),
      values: [id.scope, id.operation, id.key, fingerprint, retentionMs, `${Math.max(1, waitMs)}ms`],
    };
  },

  /**
   * The claim at commit: the same statement as `claim`, inserting the
   * completed record with its outcome instead of an in-progress one. It runs
   * last in the transaction, right before COMMIT, and finds the key held
   * exactly as the claim would.
   */
  recordAtCommit(id: RecordId, fingerprint: string, retentionMs: number, waitMs: number, outcome: EncodedOutcome): PreparedStatement {
    return {
      name: 'idempotency.record-at-commit',
      text: takeKeyText({ status: `'completed'`, outcome: ['$7::smallint', '$8::jsonb', '$9::text'], completedAt: 'now()' }),
      values: [id.scope, id.operation, id.key, fingerprint, retentionMs, `${Math.max(1, waitMs)}ms`, outcome.status, outcome.headers, outcome.body],
    };
  },

  /** A live record, read from the pool outside any transaction. */
  findLive(id: RecordId): PreparedStatement {
    return {
      name: 'idempotency.find-live',
      text: `SELECT ${RECORD_COLUMNS}, now() AS database_now FROM idempotency_records WHERE scope = $1 AND operation = $2 AND key = $3 AND expires_at > now()`,
      values: [id.scope, id.operation, id.key],
    };
  },

  /** The live record that holds the key, with a fresh snapshot. */
  readRecord(id: RecordId): PreparedStatement {
    return {
      name: 'idempotency.read',
      text: `SELECT ${RECORD_COLUMNS}, now() AS database_now FROM idempotency_records WHERE scope = $1 AND operation = $2 AND key = $3 AND expires_at > clock_timestamp()`,
      values: [id.scope, id.operation, id.key],
    };
  },

  /** Records the outcome in the claim's transaction. */
  complete(id: RecordId, outcome: EncodedOutcome): PreparedStatement {
    return {
      name: 'idempotency.complete',
      text: `UPDATE idempotency_records
                SET status = 'completed', response_status = $4, response_headers = $5, response_body = $6, completed_at = now()
              WHERE scope = $1 AND operation = $2 AND key = $3`,
      values: [id.scope, id.operation, id.key, outcome.status, outcome.headers, outcome.body],
    };
  },
};

/** What the key-taking statements insert: an in-progress claim, or a completed record with its outcome. */
interface TakenKey {
  status: string;
  /** response_status, response_headers, response_body. */
  outcome: [string, string, string];
  completedAt: string;
}

/**
 * The text of `claim` and `recordAtCommit`: $1–$3 the id, $4 the
 * fingerprint, $5 the retention in ms, $6 the lock wait.
 *
 * `wait` reads the connection's lock_timeout before setting the statement's
 * (left to right); the final projection restores it, and runs only once
 * `found`, and so the wait, is over.
 */
function takeKeyText({ status, outcome: [responseStatus, responseHeaders, responseBody], completedAt }: TakenKey): string {
  return `WITH wait AS MATERIALIZED (
            SELECT current_setting('lock_timeout') AS previous, set_config('lock_timeout', $6, true) AS applied),
          claim AS (
            INSERT INTO idempotency_records AS r
                   (scope, operation, key, fingerprint, status, response_status, response_headers, response_body, created_at, completed_at, expires_at)
            SELECT $1, $2, $3, $4, ${status}, ${responseStatus}, ${responseHeaders}, ${responseBody}, now(), ${completedAt}, now() + $5 * interval '1 millisecond' FROM wait
            ON CONFLICT (scope, operation, key) DO UPDATE
              SET fingerprint = EXCLUDED.fingerprint, status = EXCLUDED.status, response_status = EXCLUDED.response_status,
                  response_headers = EXCLUDED.response_headers, response_body = EXCLUDED.response_body, created_at = EXCLUDED.created_at,
                  completed_at = EXCLUDED.completed_at, expires_at = EXCLUDED.expires_at
              WHERE r.expires_at <= clock_timestamp() AND r.status <> 'in_progress'
            RETURNING (xmax <> 0) AS took_over, expires_at),
          found AS (
            SELECT true AS claimed, took_over, expires_at, NULL AS fingerprint, NULL AS status, NULL::smallint AS response_status,
                   NULL::jsonb AS response_headers, NULL AS response_body
              FROM claim
            UNION ALL
            SELECT false, false, expires_at, fingerprint, status, response_status, response_headers, response_body
              FROM idempotency_records
             WHERE scope = $1 AND operation = $2 AND key = $3 AND expires_at > clock_timestamp() AND NOT EXISTS (SELECT 1 FROM claim))
          SELECT found.*, now() AS database_now, set_config('lock_timeout', (SELECT previous FROM wait), true) AS lock_timeout
            FROM (SELECT) AS one LEFT JOIN found ON true`;
}

/**
 * The record of `id` as the flows use it. Its outcome goes through `outcomes`
 * (the codec), which throws IdempotencyRecordUndecryptableException for one
 * that must not be replayed.
 */
export function toStoredRecord(row: RecordRow, id: RecordId, outcomes: OutcomeDecoder): StoredRecord {
  const outcome = hasOutcome(row) ? outcomes.decode(id, row) : null;
  return { fingerprint: row.fingerprint, status: row.status, outcome, expiresAt: row.expires_at };
}

/** Whether the row holds a recorded outcome (a finished record), without reading it. */
export function hasOutcome(row: RecordRow): row is RecordRow & OutcomeColumns {
  return row.status !== 'in_progress' && row.response_status !== null;
}
