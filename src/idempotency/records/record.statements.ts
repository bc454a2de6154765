import { createHash } from 'node:crypto';
import { hashKey } from '../events/idempotency-events.js';
import type { ModuleTables } from './module-tables.js';
import { lockWaitOf } from './lock-wait.js';
import type { EncodedOutcome, RecordId, RecordRow, ResumeInfo } from './stored-record.js';

/**
 * Every statement on `idempotency_records`, in one place: the one-transaction
 * flow's (`IdempotencyStatements`), the phased flow's and the completer's
 * (`LeaseStatements`), and the reaper's (`ReaperStatements`). Callers run
 * them; none writes SQL on the table of its own. (The outbox derives its
 * event ids from a record in `OutboxStatements`, with the outbox's SQL; the
 * migration creates the table, and the startup schema check reads the catalog.)
 * Each set is built on the app's `ModuleTables`, and names the table as they
 * do, with its schema: `IdempotencyTables.of()` builds it once per app.
 */

/** A statement and its parameters, sent unnamed. */
export interface Statement {
  text: string;
  values: unknown[];
}

/** A statement the module prepares once per connection (a named prepared statement). */
export interface PreparedStatement extends Statement {
  name: string;
}

/** A named statement's text and the name it is prepared under, its parameters still to come. */
export type PreparedText = Pick<PreparedStatement, 'name' | 'text'>;

/**
 * `text` with the name it is prepared under: `base` and a digest of the
 * text. PostgreSQL keys a connection's prepared statements by name (cut at
 * 63 bytes), and node-postgres refuses a name it prepared with another text,
 * so a text that differs (another schema, another version of the module)
 * must never reuse a name: the digest makes the name follow the text, within
 * 63 bytes whatever the schema's length.
 */
export function prepared(base: string, text: string): PreparedText {
  return { name: `${base}.${createHash('sha256').update(text).digest('hex').slice(0, 16)}`, text };
}

/** The text in the error of a record sent with COMMIT that found the key held: no failure of the handler's own carries it. */
export const KEY_HELD_AT_COMMIT = 'idempotency-key-held-at-commit';

/** The columns of `RecordRow`. */
export const RECORD_COLUMNS = 'fingerprint, status, response_status, response_headers, response_body, expires_at';

/** The claim's one row: the claim itself, the live record that holds the key, or neither (`claimed` null). */
export interface ClaimRow extends Partial<RecordRow> {
  claimed: boolean | null;
  took_over: boolean | null;
  /** The database's `now()`, the instant `expires_at` is measured from. */
  database_now: Date;
}

/** The row of `recordAtCommit`, which answers only when it took the key: what dates the record. */
export type RecordedAtCommitRow = Pick<ClaimRow, 'took_over' | 'expires_at' | 'database_now'>;

/** A live record, with the database's `now()` at which it was read. */
export interface LiveRecordRow extends RecordRow {
  database_now: Date;
}

/** The row of `readForClaim`: the key's record, live or expired, with the database's `now()`. */
export interface ReadForClaimRow extends LiveRecordRow {
  /** Not expired yet: the key is held. Expired, its record is taken over when the claim's outcome is recorded. */
  live: boolean;
}

/** A row of `findLive`: a live record, and the position of its key among those asked for. */
export interface FoundLiveRow extends LiveRecordRow {
  i: number;
}

/**
 * The SQL of the one-transaction flow, as named prepared statements.
 *
 * At READ COMMITTED a key is guarded by its advisory lock (`tryLock`,
 * `waitForLock`) and read (`readForClaim`). A key that had no record gets
 * one by a plain `INSERT` sent with COMMIT (`insertRecord`); one whose record
 * expired, by `recordAtCommit`, which takes an expired record over and finds
 * the key held as a claim would. Above READ COMMITTED, `claim` takes the
 * same lock and inserts the key's in-progress record, and `completeClaim`
 * completes it with COMMIT.
 *
 * The claim inserts an in-progress record, or takes over an expired,
 * finished one (an expired phased claim is the completer's to resolve). A
 * concurrent owner's uncommitted row makes it wait, up to `lock_timeout`,
 * then fail with SQLSTATE 55P03. The same statement sets that timeout for
 * its own wait (`wait`, or less where the session's `statement_timeout`
 * would cancel the statement first) and restores the connection's own
 * afterwards, so the handler's statements run under the timeout they would
 * have without the module, and no statement is added for it.
 *
 * When the key is held, the claim returns the record, if this statement's
 * snapshot can see it live. A record committed while the claim waited on its
 * row (a first execution, or a takeover of an expired record) is newer than
 * that snapshot, which may still hold the row's expired version: expired
 * versions are never returned, and a second look (`readRecord`) finds what
 * the owner committed. Expiry is always the database's clock.
 */
export class IdempotencyStatements {
  // Built once per set: every first execution sends one of them.
  private readonly claimText: PreparedText;
  private readonly recordAtCommitText: PreparedText;
  private readonly completeClaimText: PreparedText;
  private readonly findLiveText: PreparedText;
  private readonly readText: PreparedText;
  private readonly readForClaimText: PreparedText;
  private readonly insertRecordText: PreparedText;
  private readonly tryLockText = prepared('idempotency.try-lock', 'SELECT pg_try_advisory_xact_lock($1::bigint) AS locked, now() AS database_now');
  private readonly waitForLockText = prepared(
    'idempotency.wait-for-lock',
    `WITH wait AS MATERIALIZED (SELECT current_setting('lock_timeout') AS previous, set_config('lock_timeout', ${lockWaitOf('$2::int')}, true) AS applied),
                  locked AS MATERIALIZED (SELECT pg_advisory_xact_lock($1::bigint) FROM wait)
             SELECT set_config('lock_timeout', (SELECT previous FROM wait), true) AS lock_timeout FROM locked`,
  );

  constructor({ records }: ModuleTables) {
    this.claimText = prepared(
      'idempotency.claim',
      takeKeyText(records, { status: `'in_progress'`, outcome: ['NULL::smallint', 'NULL::jsonb', 'NULL::text'], completedAt: 'NULL::timestamptz', lock: '$7::bigint' }),
    );
    this.recordAtCommitText = prepared(
      'idempotency.record-at-commit',
      takeKeyText(records, { status: `'completed'`, outcome: ['$7::smallint', '$8::jsonb', '$9::text'], completedAt: 'now()', failWhenHeld: true }),
    );
    this.completeClaimText = prepared(
      'idempotency.complete-claim',
      `INSERT INTO ${records} AS r (scope, operation, key, fingerprint, status, response_status, response_headers, response_body, created_at, completed_at, expires_at)
       VALUES ($1, $2, $3, $4, 'completed', $6::smallint, $7::jsonb, $8::text, now(), now(), now() + $5 * interval '1 millisecond')
       ON CONFLICT (scope, operation, key) DO UPDATE
         SET status = 'completed', response_status = EXCLUDED.response_status, response_headers = EXCLUDED.response_headers,
             response_body = EXCLUDED.response_body, completed_at = EXCLUDED.completed_at
         WHERE r.status = 'in_progress'
       RETURNING false AS took_over, r.expires_at, now() AS database_now`,
    );
    this.findLiveText = prepared(
      'idempotency.find-live',
      `SELECT k.i::int AS i, ${RECORD_COLUMNS}, now() AS database_now
        FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS k(scope, operation, key, i)
        JOIN ${records} r ON r.scope = k.scope AND r.operation = k.operation AND r.key = k.key AND r.expires_at > now()`,
    );
    this.readText = prepared(
      'idempotency.read',
      `SELECT ${RECORD_COLUMNS}, now() AS database_now FROM ${records} WHERE scope = $1 AND operation = $2 AND key = $3 AND expires_at > clock_timestamp()`,
    );
    this.readForClaimText = prepared(
      'idempotency.read-for-claim',
      `SELECT ${RECORD_COLUMNS}, now() AS database_now, expires_at > clock_timestamp() AS live FROM ${records} WHERE scope = $1 AND operation = $2 AND key = $3`,
    );
    this.insertRecordText = prepared(
      'idempotency.insert-record',
      `INSERT INTO ${records} (scope, operation, key, fingerprint, status, response_status, response_headers, response_body, created_at, completed_at, expires_at)
       VALUES ($1, $2, $3, $4, 'completed', $6::smallint, $7::jsonb, $8::text, now(), now(), now() + $5 * interval '1 millisecond')
       RETURNING false AS took_over, expires_at, now() AS database_now`,
    );
  }

  /**
   * Claims a key by its in-progress record, as the flow does above READ
   * COMMITTED, holding the key's advisory lock too: a claim by the lock
   * (`tryLock`, at READ COMMITTED) and a claim by the record then exclude
   * each other, as they must where the routes of one operation, or the
   * instances of one app during a deploy, start their transactions at
   * different levels. The wait for the lock is bounded as the wait for an
   * owner's row is.
   */
  claim(id: RecordId, fingerprint: string, retentionMs: number, waitMs: number): PreparedStatement {
    return { ...this.claimText, values: [id.scope, id.operation, id.key, fingerprint, retentionMs, waitOf(waitMs), lockKeyOf(id)] };
  }

  /**
   * The record of a key whose read found an expired record: the same
   * statement as `claim`, inserting the completed record with its outcome
   * instead of an in-progress one, and taking the expired one over. It is
   * sent with COMMIT, in one write on a pipelined connection, and finds the
   * key held exactly as the claim would; then it fails (a cast of the text
   * `KEY_HELD_AT_COMMIT`, SQLSTATE 22P02, on a value only a held key gives),
   * so that COMMIT rolls back everything the request wrote, and the flow
   * reads the holder.
   */
  recordAtCommit(id: RecordId, fingerprint: string, retentionMs: number, waitMs: number, outcome: EncodedOutcome): PreparedStatement {
    return {
      ...this.recordAtCommitText,
      values: [id.scope, id.operation, id.key, fingerprint, retentionMs, waitOf(waitMs), outcome.status, outcome.headers, outcome.body],
    };
  }

  /**
   * The completed record of a key that had none, sent with COMMIT: a plain
   * `INSERT`, since the key's advisory lock keeps every other claim away
   * from it, and its read found no row. A claim that took no lock (an
   * instance of an earlier version, during an upgrade) may still have
   * inserted the key meanwhile: the insert then waits for it, and fails
   * with a unique violation of the primary key if it committed
   * (`isKeyHeldAtCommit`), as `recordAtCommit` fails when the key is held.
   */
  insertRecord(id: RecordId, fingerprint: string, retentionMs: number, outcome: EncodedOutcome): PreparedStatement {
    return { ...this.insertRecordText, values: [id.scope, id.operation, id.key, fingerprint, retentionMs, outcome.status, outcome.headers, outcome.body] };
  }

  /**
   * Completes a key claimed by its in-progress record (`claim`, as the
   * flow claims at REPEATABLE READ and SERIALIZABLE) with its outcome, in the
   * claim's own transaction; sent with COMMIT. An `INSERT` that meets the
   * claim's own row and completes it, rather than an `UPDATE` that looks
   * the row up: at SERIALIZABLE a look-up by key takes a predicate lock on
   * the key's index page, or on the whole table where the planner takes it
   * for empty, and fails concurrent requests of other keys with
   * serialization failures nothing of theirs caused. The conflict check
   * reads no snapshot, and so locks nothing; the row it meets is this
   * transaction's, which nobody else can hold.
   */
  completeClaim(id: RecordId, fingerprint: string, retentionMs: number, outcome: EncodedOutcome): PreparedStatement {
    return { ...this.completeClaimText, values: [id.scope, id.operation, id.key, fingerprint, retentionMs, outcome.status, outcome.headers, outcome.body] };
  }

  /**
   * The live records of several keys in one statement, read from the pool
   * outside any transaction: each row carries `i`, the 1-based position of
   * its key in `ids`. A key may appear more than once; each copy gets its row.
   * No record column shares a name with one of `k`'s, so none needs the alias.
   */
  findLive(ids: readonly RecordId[]): PreparedStatement {
    return { ...this.findLiveText, values: [ids.map((id) => id.scope), ids.map((id) => id.operation), ids.map((id) => id.key)] };
  }

  /** The live record that holds the key, with a fresh snapshot. */
  readRecord(id: RecordId): PreparedStatement {
    return { ...this.readText, values: [id.scope, id.operation, id.key] };
  }

  /** The key's record, live or expired (`live` tells), read once the key's lock is held: whether the claim's record is inserted or takes an expired one over. */
  readForClaim(id: RecordId): PreparedStatement {
    return { ...this.readForClaimText, values: [id.scope, id.operation, id.key] };
  }

  /**
   * The guard of a key claimed first: its transaction-level advisory lock,
   * taken if free, with the transaction's `now()` (which the record inserted
   * at commit will be dated by). Sent with BEGIN; the record is read by a
   * statement of its own after it, whose snapshot is taken once the lock is
   * held, so it sees what any earlier holder committed.
   */
  tryLock(id: RecordId): PreparedStatement {
    return { ...this.tryLockText, values: [lockKeyOf(id)] };
  }

  /**
   * Waits for the holder of the key's lock, at most `waitMs` or what the
   * session's `statement_timeout` allows (then SQLSTATE 55P03: see
   * `lockWaitOf`), and restores the connection's own `lock_timeout`, as the
   * claim does.
   */
  waitForLock(id: RecordId, waitMs: number): PreparedStatement {
    return { ...this.waitForLockText, values: [lockKeyOf(id), waitOf(waitMs)] };
  }
}

/**
 * The key's advisory lock: the first 64 bits of the key's hash (as in
 * events), signed, as `pg_advisory_xact_lock(bigint)` takes them. Two keys
 * that share it wait on each other, nothing more: the record's primary key
 * still decides what replays.
 */
function lockKeyOf(id: RecordId): string {
  return BigInt.asIntN(64, BigInt(`0x${hashKey(id)}`)).toString();
}

/** A statement's lock wait as its parameter: whole ms, at least 1. */
function waitOf(waitMs: number): number {
  return Math.max(1, Math.ceil(waitMs));
}

/** What the key-taking statements insert: an in-progress claim, or a completed record with its outcome. */
interface TakenKey {
  status: string;
  /** response_status, response_headers, response_body. */
  outcome: [string, string, string];
  completedAt: string;
  /** Fail the statement, and so its transaction, when the key is held, instead of answering the holder. */
  failWhenHeld?: boolean;
  /** SQL for the key's advisory lock, taken (and waited for, as long as the row) before the insert; absent, where the caller holds it already. */
  lock?: string;
}

/**
 * The text of `claim` and `recordAtCommit` on the table `records`: $1–$3 the
 * id, $4 the fingerprint, $5 the retention in ms, $6 the lock wait in ms
 * (bounded by the session's `statement_timeout`: see `lockWaitOf`).
 *
 * `wait` reads the connection's lock_timeout before setting the statement's
 * (left to right); the final projection restores it, and runs only once
 * `found`, and so the wait, is over.
 */
function takeKeyText(records: string, { status, outcome: [responseStatus, responseHeaders, responseBody], completedAt, failWhenHeld = false, lock }: TakenKey): string {
  // Evaluated per row, never folded at planning (it reads a column): 1 when this statement took the key, else a cast
  // that fails with a message no statement of the handler's can raise (see isKeyHeldAtCommit).
  const heldFails = failWhenHeld ? `, CASE WHEN found.claimed IS TRUE THEN 1 ELSE (coalesce(found.claimed, false)::text || ':${KEY_HELD_AT_COMMIT}')::int END AS taken` : '';
  // A statement that fails when the key is held answers only for a key it took: the holder's columns would be null.
  const answered = failWhenHeld ? 'found.took_over, found.expires_at' : 'found.*';
  // The insert reads from the lock's row, so that it runs once the lock is held.
  const locked = lock ? `\n          locked AS MATERIALIZED (SELECT pg_advisory_xact_lock(${lock}) FROM wait),` : '';
  return `WITH wait AS MATERIALIZED (
            SELECT current_setting('lock_timeout') AS previous, set_config('lock_timeout', ${lockWaitOf('$6::int')}, true) AS applied),${locked}
          claim AS (
            INSERT INTO ${records} AS r
                   (scope, operation, key, fingerprint, status, response_status, response_headers, response_body, created_at, completed_at, expires_at)
            SELECT $1, $2, $3, $4, ${status}, ${responseStatus}, ${responseHeaders}, ${responseBody}, now(), ${completedAt}, now() + $5 * interval '1 millisecond' FROM ${lock ? 'locked' : 'wait'}
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
              FROM ${records}
             WHERE scope = $1 AND operation = $2 AND key = $3 AND expires_at > clock_timestamp() AND NOT EXISTS (SELECT 1 FROM claim))
          SELECT ${answered}, now() AS database_now, set_config('lock_timeout', (SELECT previous FROM wait), true) AS lock_timeout${heldFails}
            FROM (SELECT) AS one LEFT JOIN found ON true`;
}

/** The row of `LeaseStatements.claim`: the claim, or the record that holds the key (`claimed` false), or none. */
/** A phased claim's terms: who claims, for how long the lease and the record, and how long it may wait on a row lock. */
export interface LeaseTerms {
  owner: string;
  leaseMs: number;
  retentionMs: number;
  lockTimeoutMs: number;
}

export type LeaseClaimRow = RecordRow & {
  claimed: boolean;
  took_over: boolean;
  attempts: number;
  phase_results: Record<string, unknown>;
  run: string;
  lease_live: boolean;
  database_now: Date;
};

/** The row of `LeaseStatements.takeOver`: what resuming the operation needs. */
export interface TakenOverRow {
  fingerprint: string;
  resume: ResumeInfo | null;
  phase_results: Record<string, unknown>;
  attempts: number;
  recovery_point: string | null;
  run: string;
}

/** A row of `LeaseStatements.abandoned`: the claim, its stale owner, and the operation it resumes (none: never started). */
export type AbandonedRow = RecordId & { owner_token: string | null; resumes: string | null };

const PK = 'scope = $1 AND operation = $2 AND key = $3';
/**
 * The identity of a run of a key: the instant its record was claimed
 * (`created_at`, to the microsecond, in UTC). A lease takeover keeps it; a
 * claim of an expired record starts a new run, with a later instant.
 */
const RUN = `to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
const ms = (parameter: string) => `${parameter} * interval '1 millisecond'`;

/**
 * The SQL of phased operations, each statement committing on its own unless
 * run in a phase's transaction. Every write after the claim is fenced by
 * `owner_token = $owner`: a stale owner that wakes up after a takeover
 * matches no row, so it can never overwrite the new owner's work.
 */
export class LeaseStatements {
  private readonly records: string;

  constructor({ records }: ModuleTables) {
    this.records = records;
  }

  /**
   * Claims the key with a lease. An expired finished record starts over; an
   * in-progress one whose lease lapsed is taken over with its recovery point
   * and phase results.
   *
   * A key that is held is never waited on: the statement reads the record
   * first and attempts the claim only when the key is free or claimable, so a
   * duplicate of a live owner (whose local phase may hold the record's row
   * lock for as long as the phase runs) gets the holder's record back at
   * once. The attempt itself waits at most `lockTimeoutMs` on a row lock
   * (SQLSTATE 55P03 after that). No row: the key is held by a claim this
   * statement's snapshot could not see yet (an expired record is never a holder).
   * A lapsed lease is taken over when its record's fingerprint is one of
   * `accepted` (this request's, under each key: see request-fingerprints.ts),
   * and the record then holds `written`.
   *
   * The attempt takes the key's advisory lock first, as the one-transaction
   * flow's claims do, for the statement's length: a one-transaction owner of
   * the key (a route of the same operation, or of the same route before a
   * deploy made it phased) is waited on like a row lock, and never runs
   * beside a phased one.
   */
  claim(id: RecordId, fingerprint: { written: string; accepted: readonly string[] }, { owner, leaseMs, retentionMs, lockTimeoutMs }: LeaseTerms): Statement {
    return {
      text: `WITH wait AS MATERIALIZED (SELECT set_config('lock_timeout', $8, true)),
       locked AS MATERIALIZED (SELECT pg_advisory_xact_lock($10::bigint) FROM wait),
       held AS (
         SELECT ${RECORD_COLUMNS}, coalesce(lease_expires_at > now(), false) AS lease_live,
                (status <> 'in_progress' AND expires_at <= now())
                  OR (status = 'in_progress' AND lease_expires_at <= now() AND fingerprint = ANY($9::text[])) AS claimable
           FROM ${this.records} WHERE ${PK}),
       claim AS (
         INSERT INTO ${this.records} AS r
                (scope, operation, key, fingerprint, status, created_at, expires_at, owner_token, lease_expires_at)
         SELECT $1, $2, $3, $4, 'in_progress', now(), now() + ${ms('$5')}, $6, now() + ${ms('$7')}
           FROM locked WHERE NOT EXISTS (SELECT 1 FROM held WHERE NOT claimable)
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
            OR (r.status = 'in_progress' AND r.lease_expires_at <= now() AND r.fingerprint = ANY($9::text[]))
         RETURNING (xmax <> 0) AS took_over, attempts, phase_results, ${RUN} AS run)
       SELECT true AS claimed, took_over, attempts, phase_results, run,
              NULL AS fingerprint, NULL AS status, NULL::smallint AS response_status, NULL::jsonb AS response_headers,
              NULL AS response_body, NULL::timestamptz AS expires_at, NULL::boolean AS lease_live, NULL::timestamptz AS database_now
         FROM claim
       UNION ALL
       SELECT false, NULL, NULL, NULL, NULL, ${RECORD_COLUMNS}, lease_live, now()
         FROM held WHERE NOT EXISTS (SELECT 1 FROM claim) AND (status = 'in_progress' OR expires_at > now())`,
      values: [id.scope, id.operation, id.key, fingerprint.written, retentionMs, owner, leaseMs, `${Math.max(1, Math.ceil(lockTimeoutMs))}ms`, fingerprint.accepted, lockKeyOf(id)],
    };
  }

  /**
   * The completer's takeover of an abandoned claim: a compare-and-set on the
   * owner token, so of several reapers exactly one wins. A record whose row
   * is locked (an owner's local phase is committing) is skipped, not waited on.
   */
  takeOver(id: RecordId, staleOwner: string | null, owner: string, leaseMs: number): Statement {
    return {
      text: `WITH free AS (
           SELECT ctid FROM ${this.records}
            WHERE ${PK} AND status = 'in_progress' AND lease_expires_at <= now() AND owner_token IS NOT DISTINCT FROM $4
            FOR UPDATE SKIP LOCKED),
         taken AS (
           UPDATE ${this.records} SET owner_token = $5, lease_expires_at = now() + ${ms('$6')}, attempts = attempts + 1
            WHERE ctid IN (SELECT ctid FROM free)
            RETURNING fingerprint, resume, phase_results, attempts, recovery_point, ${RUN} AS run)
         SELECT * FROM taken`,
      values: [id.scope, id.operation, id.key, staleOwner, owner, leaseMs],
    };
  }

  /** Deletes a claim that never started its operation (one row back when it did): no side effect can exist, so the key is simply free again. */
  discardUnstarted(id: RecordId, owner: string): Statement {
    return {
      text: `WITH gone AS (DELETE FROM ${this.records} WHERE ${PK} AND owner_token = $4 AND status = 'in_progress' AND resume IS NULL RETURNING 1)
       SELECT 1 FROM gone`,
      values: [id.scope, id.operation, id.key, owner],
    };
  }

  /** Extends the lease. Inside a transaction it also locks the record. */
  renew(id: RecordId, owner: string, leaseMs: number): Statement {
    return fenced(this.records, `lease_expires_at = now() + ${ms('$5')}`, id, owner, [leaseMs]);
  }

  /**
   * Records a finished phase as the new recovery point, and notes it in the
   * order the phases finished (`resume.phases`): `phase_results` is an
   * object, which jsonb keeps in an order of its own.
   */
  savePhase(id: RecordId, owner: string, phase: string, resultJson: string, leaseMs: number): Statement {
    return fenced(
      this.records,
      `phase_results = phase_results || jsonb_build_object($5::text, $6::jsonb), recovery_point = $5, lease_expires_at = now() + ${ms('$7')},
       resume = jsonb_set(resume, '{phases}', coalesce(resume->'phases', '[]'::jsonb) || to_jsonb($5::text))`,
      id,
      owner,
      [phase, resultJson, leaseMs],
    );
  }

  /** Stores what resuming needs once per run, keeping an earlier owner's: returns what is stored, no row when `owner` lost the claim. */
  saveResume(id: RecordId, owner: string, resume: ResumeInfo): Statement {
    return {
      text: `WITH fenced AS (
         UPDATE ${this.records} SET resume = coalesce(resume, $5::jsonb)
          WHERE ${PK} AND owner_token = $4 AND status = 'in_progress' RETURNING resume)
       SELECT resume FROM fenced`,
      values: [id.scope, id.operation, id.key, owner, JSON.stringify(resume)],
    };
  }

  /** Lets the lease lapse now, so that a retry resumes at once. */
  release(id: RecordId, owner: string): Statement {
    return fenced(this.records, `lease_expires_at = now()`, id, owner, []);
  }

  /** Records the outcome, `failed` with a reason for an operation that cannot be completed, and ends the lease. */
  finish(id: RecordId, owner: string, outcome: EncodedOutcome, retentionMs: number, failureReason?: string): Statement {
    return fenced(
      this.records,
      `status = $5, response_status = $6, response_headers = $7, response_body = $8, failure_reason = $9,
       completed_at = now(), expires_at = now() + ${ms('$10')}, owner_token = NULL, lease_expires_at = NULL`,
      id,
      owner,
      [failureReason ? 'failed' : 'completed', outcome.status, outcome.headers, outcome.body, failureReason ?? null, retentionMs],
    );
  }

  /** Up to `limit` claims whose lease lapsed, the longest lapsed first: the completer's candidates. */
  abandoned(limit: number): Statement {
    return {
      text: `SELECT scope, operation, key, owner_token, resume->>'operation' AS resumes FROM ${this.records}
              WHERE status = 'in_progress' AND lease_expires_at <= now() ORDER BY lease_expires_at LIMIT $1`,
      values: [limit],
    };
  }
}

/** An update of `owner`'s claim on `records` (parameters from $5 on): one row back while `owner` holds it, none once it lost it. */
function fenced(records: string, assignments: string, id: RecordId, owner: string, extra: unknown[]): Statement {
  return {
    text: `WITH fenced AS (
         UPDATE ${records} SET ${assignments}
          WHERE ${PK} AND owner_token = $4 AND status = 'in_progress' RETURNING 1)
       SELECT 1 FROM fenced`,
    values: [id.scope, id.operation, id.key, owner, ...extra],
  };
}

/** The reaper's SQL: each batch is a transaction of its own that takes the lock first. */
export class ReaperStatements {
  /**
   * One batch: finished records expired by $1 (null: the database's `now()`), at most $2 of them, oldest
   * first, skipping rows a live claim holds. `ctid = ANY(ARRAY(...))` keeps the
   * plan a TID scan at any table size, whatever the statistics say.
   */
  private readonly batchText: string;

  constructor({ records }: ModuleTables) {
    this.batchText = `
  WITH gone AS (
    DELETE FROM ${records}
     WHERE ctid = ANY (ARRAY(
       SELECT ctid FROM ${records}
        WHERE expires_at <= coalesce($1::timestamptz, now()) AND status <> 'in_progress'
        ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED))
    RETURNING 1)
  SELECT count(*)::int AS deleted FROM gone`;
  }

  /** A transaction-level advisory lock, so that with several instances only one reaps at a time. */
  lock(): Statement {
    return { text: `SELECT pg_try_advisory_xact_lock(hashtext('idempotency_records:reaper')) AS locked`, values: [] };
  }

  /** Deletes one batch: expired by `now` (absent: the database's clock), at most `limit`. */
  batch(now: Date | undefined, limit: number): Statement {
    return { text: this.batchText, values: [now ?? null, limit] };
  }
}
