import type { ModuleTables } from '../records/module-tables.js';
import { prepared, type PreparedStatement, type PreparedText } from '../records/record.statements.js';
import type { RecordId } from '../records/stored-record.js';

/** A statement with its parameters, run through TypeORM's or pg's `query(text, values)`. */
export interface OutboxStatement {
  text: string;
  values: unknown[];
}

/** One pending event as the relay reads it. */
export interface OutboxRow {
  id: string;
  seq: string;
  type: string;
  payload: unknown;
  headers: Record<string, string>;
  ordering_key: string | null;
  source_key_hash: string | null;
  attempts: number;
  created_at: Date;
}

/** What an event insert needs besides the operation. */
interface OutboxInsert {
  type: string;
  payload: string;
  headers: string;
  orderingKey: string | null;
  sourceKeyHash: string | null;
}

/** How failed publishes back off: `baseMs * 2^attempts`, capped at `maxMs`, with full jitter down to half. */
interface OutboxBackoff {
  baseMs: number;
  maxMs: number;
}

/**
 * Takes the ordering key's transaction lock before the row gets its `seq`:
 * a materialised CTE runs before the rows that read it are formed, so a
 * later writer of the key waits for this one's commit and gets a higher
 * `seq`. `lock_timeout` bounds the wait where a flow set it. It also
 * notifies the relay's channel when asked (PostgreSQL delivers at commit,
 * and folds repeats within a transaction into one).
 */
const orderingLock = (notify: string) => `ordering AS MATERIALIZED (
  SELECT (SELECT count(*) FROM (SELECT pg_advisory_xact_lock(hashtextextended('idempotency_outbox:' || $4, 0)) WHERE $4::text IS NOT NULL) AS held) AS locks,
         (SELECT count(*) FROM (SELECT pg_notify('${OUTBOX_CHANNEL}', '') WHERE ${notify}::boolean) AS sent) AS notified)`;

/**
 * A UUID (version 8, RFC 9562's custom layout) of the SHA-256 of the record's
 * scope, operation and key, its claim time (so that a key reused after
 * retention names new events), the phase and the event's index.
 */
const DERIVED_ID = `(substr(h, 1, 12) || '8' || substr(h, 14, 3) || substr('89ab', ('x' || substr(h, 17, 1))::bit(4)::int % 4 + 1, 1) || substr(h, 18, 15))::uuid`;

/** The hash `DERIVED_ID` reads, over the record's columns in scope (scope, operation, key, created_at), the phase and the index. */
const derivedHash = (phase: string, index: string) =>
  `encode(sha256(convert_to(concat_ws(E'\\n', scope, operation, key, (extract(epoch FROM created_at) * 1000000)::bigint, ${phase}, ${index}), 'UTF8')), 'hex')`;

/**
 * The ids `insertForOperation` gave the first `perTransaction` events of each
 * transaction of a record's run: one transaction per phase named by `phases`
 * (an SQL `text[]`; `''` is a one-transaction flow's), the run being the
 * record aliased `record` in the enclosing statement. Looked up on the
 * primary key, they find what the run added without a scan.
 */
export function runEventIds(record: string, phases: string, perTransaction: number): string {
  return `ARRAY(SELECT ${DERIVED_ID} FROM (
            SELECT ${derivedHash('p.phase', 'i.n')} AS h
              FROM (SELECT ${record}.scope, ${record}.operation, ${record}.key, ${record}.created_at) AS run,
                   unnest(${phases}) AS p(phase), generate_series(0, ${perTransaction - 1}) AS i(n)) AS derived)`;
}

/** The channel the relay listens on. */
export const OUTBOX_CHANNEL = 'idempotency_outbox';

const COLUMNS = 'id, type, payload, headers, ordering_key, source_key_hash';

/** `insertForOperation`'s text, inserting into `outbox` and reading the claim time from `record`. */
const insertForOperationText = (outbox: string, record: string) => `WITH ${orderingLock('$11')},
             source AS (
               SELECT ${derivedHash('$8::text', '$9::int')} AS h
                 FROM ${record})
             INSERT INTO ${outbox} (${COLUMNS})
             SELECT ${DERIVED_ID}, $1, $2::jsonb, $3::jsonb, $4, $10 FROM source, ordering
             RETURNING id`;

/** All SQL on `idempotency_outbox`, naming it (and the records it derives ids from) in the app's schema. */
export class OutboxStatements {
  private readonly outbox: string;
  // Built once per set: most requests that write send one of them.
  private readonly insertForOperationText: PreparedText;
  private readonly insertAtCommitText: PreparedText;
  private readonly insertText: string;

  constructor({ records, outbox }: ModuleTables) {
    this.outbox = outbox;
    this.insertForOperationText = prepared('idempotency.outbox-insert-for-operation', insertForOperationText(outbox, `${records} WHERE scope = $5 AND operation = $6 AND key = $7`));
    this.insertAtCommitText = prepared(
      'idempotency.outbox-insert-at-commit',
      insertForOperationText(outbox, '(SELECT $5::text AS scope, $6::text AS operation, $7::text AS key, now() AS created_at) AS r'),
    );
    this.insertText = `WITH ${orderingLock('$6')}
             INSERT INTO ${outbox} (${COLUMNS})
             SELECT gen_random_uuid(), $1, $2::jsonb, $3::jsonb, $4, $5 FROM ordering
             RETURNING id`;
  }

  /**
   * Adds an event of the operation `id`: its identity comes from the record,
   * which the operation's own transaction can always see. No row comes back
   * when it cannot (a transaction other than the operation's). A record
   * inserted only at commit (`recordAtCommit`) is not there yet: its claim
   * time will be this transaction's `now()`, which the identity takes instead.
   */
  insertForOperation({ id, phase, recordAtCommit }: { id: RecordId; phase: string; recordAtCommit: boolean }, index: number, event: OutboxInsert, notify: boolean): PreparedStatement {
    return {
      ...(recordAtCommit ? this.insertAtCommitText : this.insertForOperationText),
      values: [event.type, event.payload, event.headers, event.orderingKey, id.scope, id.operation, id.key, phase, index, event.sourceKeyHash, notify],
    };
  }

  /** Adds an event outside any idempotent operation: its id is random. */
  insert(event: OutboxInsert, notify: boolean): OutboxStatement {
    return {
      text: this.insertText,
      values: [event.type, event.payload, event.headers, event.orderingKey, event.sourceKeyHash, notify],
    };
  }

  /**
   * Claims up to `limit` due events, oldest first, skipping rows another
   * relay holds. An event whose key has an older event waiting out a backoff
   * is left alone, so a failing head never fills the batch with events it
   * blocks.
   */
  claimBatch(limit: number): OutboxStatement {
    return {
      text: `SELECT ${COLUMNS}, seq, attempts, created_at FROM ${this.outbox} e
              WHERE status = 'pending' AND next_attempt_at <= now()
                AND (ordering_key IS NULL OR NOT EXISTS (
                      SELECT 1 FROM ${this.outbox} b
                       WHERE b.ordering_key = e.ordering_key AND b.status = 'pending' AND b.seq < e.seq AND b.next_attempt_at > now()))
              ORDER BY seq LIMIT $1
              FOR UPDATE SKIP LOCKED`,
      values: [limit],
    };
  }

  /**
   * The oldest pending event of each key that this batch did not claim: a
   * batch's events of a key at or after it must wait (another relay holds
   * it, or it waits out a backoff).
   */
  blockers(keys: string[], claimed: string[]): OutboxStatement {
    return {
      text: `SELECT ordering_key, min(seq) AS seq FROM ${this.outbox}
              WHERE status = 'pending' AND ordering_key = ANY($1::text[]) AND id <> ALL($2::uuid[])
              GROUP BY ordering_key`,
      values: [keys, claimed],
    };
  }

  markSent(ids: string[]): OutboxStatement {
    return {
      text: `UPDATE ${this.outbox} SET status = 'sent', attempts = attempts + 1, settled_at = now(), last_error = NULL WHERE id = ANY($1::uuid[])`,
      values: [ids],
    };
  }

  /** Counts a failed attempt of each event; an event at `maxAttempts` becomes a dead letter. Returns the dead ones. */
  markFailed(ids: string[], errors: string[], maxAttempts: number, backoff: OutboxBackoff): OutboxStatement {
    return {
      text: `UPDATE ${this.outbox} o
                SET attempts = o.attempts + 1,
                    last_error = f.error,
                    status = CASE WHEN o.attempts + 1 >= $3 THEN 'dead' ELSE 'pending' END,
                    settled_at = CASE WHEN o.attempts + 1 >= $3 THEN now() END,
                    next_attempt_at = now() + least($5::float8, $4::float8 * 2 ^ o.attempts) * (0.5 + random() / 2) * interval '1 millisecond'
               FROM unnest($1::uuid[], $2::text[]) AS f(id, error)
              WHERE o.id = f.id
              RETURNING o.id, o.type, o.status, o.attempts`,
      values: [ids, errors, maxAttempts, backoff.baseMs, backoff.maxMs],
    };
  }

  /** Pending events, and the age of the oldest one in seconds (0 when none). */
  stats(): OutboxStatement {
    return {
      text: `SELECT count(*)::int AS pending, coalesce(extract(epoch FROM clock_timestamp() - min(created_at)), 0)::float8 AS oldest_age_seconds
               FROM ${this.outbox} WHERE status = 'pending'`,
      values: [],
    };
  }

  /**
   * One cleanup batch: settled events (sent or dead) settled more than
   * `retentionMs` before `now` (absent: the database's clock, as for
   * `settled_at`), at most `limit`, oldest first; a TID scan, as in the
   * records' reaper.
   */
  reapBatch(now: Date | undefined, retentionMs: number, limit: number): OutboxStatement {
    return {
      text: `WITH gone AS (
               DELETE FROM ${this.outbox}
                WHERE ctid = ANY (ARRAY(
                  SELECT ctid FROM ${this.outbox}
                   WHERE status <> 'pending' AND settled_at <= coalesce($1::timestamptz, now()) - $2::float8 * interval '1 millisecond'
                   ORDER BY settled_at LIMIT $3 FOR UPDATE SKIP LOCKED))
               RETURNING 1)
             SELECT count(*)::int AS deleted FROM gone`,
      values: [now ?? null, retentionMs, limit],
    };
  }

  /** Puts dead letters back to pending with their attempts reset (by id, or all when `ids` is omitted). */
  requeueDead(ids?: string[]): OutboxStatement {
    return {
      text: `UPDATE ${this.outbox} SET status = 'pending', attempts = 0, settled_at = NULL, next_attempt_at = now()
              WHERE status = 'dead' AND ($1::uuid[] IS NULL OR id = ANY($1::uuid[]))`,
      values: [ids ?? null],
    };
  }
}

/** The cleanup's advisory lock: one instance sweeps at a time. */
export const OUTBOX_REAPER_LOCK = `SELECT pg_try_advisory_xact_lock(hashtext('idempotency_outbox:reaper')) AS locked`;
