import { OUTBOX_CHANNEL, runEventIds } from '../outbox/outbox.store.js';
import type { ModuleTables } from '../records/module-tables.js';
import type { Statement } from '../records/record.statements.js';
import type { RecordId } from '../records/stored-record.js';
import type { KeySearchPosition, RecordPosition, ScopePair } from './admin-cursor.js';

/**
 * Every statement of the admin, on both tables: what operators read
 * (`AdminRecordStatements`, `AdminOutboxStatements`) and the three actions.
 * The module's own statements stay where they are (`records/record.statements.ts`,
 * `outbox/outbox.store.ts`); none of these runs in a request's flow. Both
 * sets name the tables as the app's `ModuleTables` do, with their schema. Each
 * list is a keyset page on an index (`AdminIndexes` names which), never a
 * scan: the EXPLAIN of each on a table of a million rows is in docs/admin.md.
 */

/** The channel a release is announced on, at commit: instances drop the released key's cached outcome. */
export const RELEASED_CHANNEL = 'idempotency_released';

/** Which index each list walks: the migrations create them, the admin's startup check looks for them. */
export const AdminIndexes = {
  /** Records by key: distinct scopes and operations, then one lookup each. */
  byKey: 'idempotency_records_pkey',
  /** Records newest first; or, for a few scopes, the primary key, as the planner finds cheaper. */
  newest: 'idempotency_records_created_at_idx',
  unfinished: 'idempotency_records_lease_idx',
  pending: 'idempotency_outbox_pending_idx',
  dead: 'idempotency_outbox_dead_idx',
} as const;

/** Which records a statement selects, as the service validated them: `scopes` undefined means every scope. */
export interface RecordFilter {
  scopes?: readonly string[];
  operation?: string;
  key?: string;
  status?: string;
  since?: Date;
  until?: Date;
  after?: RecordPosition;
}

/** The position of a row in its list, to the microsecond, in UTC. */
const positionOf = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/** A record's summary columns, of the table aliased `r`. */
const SUMMARY = `r.scope, r.operation, r.key, r.status, r.response_status, r.created_at, r.completed_at, r.expires_at, r.expires_at <= now() AS expired, r.attempts`;

/** A statement's WHERE clause and parameters, built from what a caller asked for. */
class Conditions {
  readonly values: unknown[] = [];
  private readonly parts: string[] = [];

  /** A placeholder for `value`. */
  param(value: unknown): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }

  and(condition: string): void {
    this.parts.push(condition);
  }

  get where(): string {
    return this.parts.length ? `WHERE ${this.parts.join(' AND ')}` : '';
  }
}

/**
 * How many claims a filtered search reads at most per page: a status or an
 * operation is not in the index the search walks (an index naming `status`
 * would make every completion a non-HOT update), so it is looked for among
 * this many claims, newest first, and the page's cursor carries on from the
 * oldest one read.
 */
export const SEARCH_WINDOW = 10_000;

/**
 * How many (scope, operation) pairs a key search across every scope walks at
 * most per page, in the primary key's order: an index descent and a lookup
 * of the key under each, 10 to 40 µs apiece, so a page takes 0.1 to 0.4 s
 * whatever the number of tenants (docs/admin.md has the figures at 200,000);
 * the page's cursor carries on with the following pairs.
 */
export const KEY_SEARCH_WINDOW = 10_000;

/** Newest claim first; the primary key breaks ties. */
const NEWEST_FIRST = 'ORDER BY r.created_at DESC, r.scope DESC, r.operation DESC, r.key DESC';

/** The conditions on claim time and the page's position: the bounds of an ordered walk of `created_at`. */
function claimTimeConditions(conditions: Conditions, filter: RecordFilter): void {
  if (filter.since) conditions.and(`r.created_at >= ${conditions.param(filter.since)}::timestamptz`);
  if (filter.until) conditions.and(`r.created_at < ${conditions.param(filter.until)}::timestamptz`);
  const after = filter.after;
  if (after) {
    // Spelled out rather than as one row comparison, so that the bound on created_at is an index condition.
    const at = `${conditions.param(after.at)}::timestamptz`;
    const id = `(${conditions.param(after.scope)}, ${conditions.param(after.operation)}, ${conditions.param(after.key)})`;
    conditions.and(`r.created_at <= ${at} AND (r.created_at < ${at} OR (r.scope, r.operation, r.key) < ${id})`);
  }
}

/**
 * How many events of each transaction of a run the admin looks for: a
 * transaction's events are numbered from 0, so this finds every run that
 * added any (the first ones rolled back with a savepoint aside), and counts
 * up to this many of each.
 */
const RUN_EVENTS_LOOKED_FOR = 64;

/** The admin's SQL on `idempotency_records`: its lists, one record, and the locks and writes of `release` and `fail`. */
export class AdminRecordStatements {
  private readonly records: string;
  /** The finished phases of the record aliased `r`, and its run's outbox events by state: what a release leaves behind. */
  private readonly runEffects: string;

  constructor({ records, outbox }: ModuleTables) {
    this.records = records;
    const phases = phasesInOrder('r');
    const state = (status: string) => `'${status}', count(*) FILTER (WHERE o.status = '${status}')`;
    this.runEffects = `${phases} AS phases,
      (SELECT json_build_object(${state('sent')}, ${state('pending')}, ${state('dead')}) FROM ${outbox} o
        WHERE o.id = ANY(${runEventIds('r', `ARRAY[''] || ${phases}`, RUN_EVENTS_LOOKED_FOR)})) AS events`;
  }

  /**
   * The newest records first, `limit` of them, in the scopes and time range
   * asked for, after `filter.after`: on `idempotency_records_created_at_idx`
   * read backwards, or, for a few small scopes, their part of the primary
   * key, sorted (the planner picks). With a status or an operation to match,
   * it reads `SEARCH_WINDOW` claims at most and answers the matches among
   * them, plus the last claim read (`window_end`) when it read that many,
   * for the next page to start after.
   */
  newest(filter: RecordFilter, limit: number): Statement {
    const conditions = new Conditions();
    if (filter.scopes) conditions.and(`r.scope = ANY(${conditions.param(filter.scopes)}::text[])`);
    claimTimeConditions(conditions, filter);
    const matching: string[] = [];
    if (filter.operation) matching.push(`r.operation = ${conditions.param(filter.operation)}`);
    if (filter.status) matching.push(`r.status = ${conditions.param(filter.status)}`);
    const walk = `SELECT ${SUMMARY}, ${positionOf('r.created_at')} AS position FROM ${this.records} r ${conditions.where} ${NEWEST_FIRST}`;
    if (matching.length === 0) return { text: `${walk} LIMIT ${conditions.param(limit)}`, values: conditions.values };
    const window = conditions.param(SEARCH_WINDOW);
    return {
      text: `WITH searched AS MATERIALIZED (${walk} LIMIT ${window})
             (SELECT *, false AS window_end FROM searched r WHERE ${matching.join(' AND ')} ${NEWEST_FIRST} LIMIT ${conditions.param(limit)})
             UNION ALL
             (SELECT *, true FROM searched r WHERE (SELECT count(*) FROM searched) = ${window} ORDER BY r.created_at, r.scope, r.operation, r.key LIMIT 1)`,
      values: conditions.values,
    };
  }

  /**
   * The records of one key (`filter.key`) in every scope and operation asked
   * for, newest first. The primary key leads with scope and operation, so
   * the statement walks their distinct values (a skip scan: one index
   * descent for each) and looks the key up under each pair: its cost grows
   * with the number of tenants and operations, never with the rows. Across
   * every scope (`filter.scopes` undefined) it walks `KEY_SEARCH_WINDOW`
   * pairs at most, those of `window`, and answers the last one it walked
   * (`window_scope`, `window_operation`) when it walked that many, for the
   * next page to start after. It answers one row with no record when none
   * matches, so that the window's end still comes back.
   */
  byKey(filter: RecordFilter & { key: string }, limit: number, window: KeySearchPosition = {}): Statement {
    const conditions = new Conditions();
    const key = conditions.param(filter.key);
    const pairs = filter.scopes ? this.listedPairs(conditions, filter.scopes, filter.operation) : this.pairWindow(conditions, window, filter.operation);
    const windowEnd = filter.scopes ? '(SELECT NULL::text AS scope, NULL::text AS operation)' : `(SELECT scope, operation FROM pairs WHERE n = ${KEY_SEARCH_WINDOW})`;
    conditions.and('p.scope IS NOT NULL AND p.operation IS NOT NULL');
    if (filter.status) conditions.and(`r.status = ${conditions.param(filter.status)}`);
    claimTimeConditions(conditions, filter);
    return {
      text: `WITH RECURSIVE ${pairs}
             SELECT w.scope AS window_scope, w.operation AS window_operation, m.*
               FROM (SELECT 1) AS one
               LEFT JOIN ${windowEnd} w ON true
               LEFT JOIN (
                 SELECT ${SUMMARY}, ${positionOf('r.created_at')} AS position
                   FROM pairs p
                   -- LIMIT 1 (the primary key holds one row at most) keeps it a lookup per pair: joined plainly, the
                   -- planner may prefer one pass over the whole primary key, filtering on its last column.
                   CROSS JOIN LATERAL (SELECT * FROM ${this.records} x WHERE x.scope = p.scope AND x.operation = p.operation AND x.key = ${key} LIMIT 1) r
                  ${conditions.where}
                  ${NEWEST_FIRST} LIMIT ${conditions.param(limit)}) m ON true
              ORDER BY m.created_at DESC, m.scope DESC, m.operation DESC, m.key DESC`,
      values: conditions.values,
    };
  }

  /** The (scope, operation) pairs of the listed scopes: each scope's distinct operations, or the one asked for. */
  private listedPairs(conditions: Conditions, scopes: readonly string[], operation: string | undefined): string {
    const listed = `scopes(scope) AS (SELECT unnest(${conditions.param(scopes)}::text[]))`;
    if (operation) return `${listed}, pairs(scope, operation) AS (SELECT scope, ${conditions.param(operation)}::text FROM scopes)`;
    return `${listed}, pairs(scope, operation) AS (
           SELECT s.scope, (SELECT r.operation FROM ${this.records} r WHERE r.scope = s.scope ORDER BY r.operation LIMIT 1) FROM scopes s
           UNION ALL
           SELECT p.scope, (SELECT r.operation FROM ${this.records} r WHERE r.scope = p.scope AND r.operation > p.operation ORDER BY r.operation LIMIT 1)
             FROM pairs p WHERE p.operation IS NOT NULL)`;
  }

  /**
   * The next `KEY_SEARCH_WINDOW` (scope, operation) pairs of every scope in
   * the primary key's order, after `from` and up to `to`, numbered `n`: one
   * index descent each, on the row comparison of the key's leading columns.
   * With an operation asked for, the scopes instead, paired with it.
   */
  private pairWindow(conditions: Conditions, { from, to }: KeySearchPosition, operation: string | undefined): string {
    const [walked, order] = operation ? ['r.scope', 'r.scope'] : ['(r.scope, r.operation)', 'r.scope, r.operation'];
    const bound = (pair: ScopePair) => (operation ? conditions.param(pair.scope) : `(${conditions.param(pair.scope)}, ${conditions.param(pair.operation)})`);
    const upTo = to ? ` AND ${walked} <= ${bound(to)}` : '';
    const columns = operation ? `r.scope, ${conditions.param(operation)}::text AS operation` : 'r.scope, r.operation';
    return `pairs(scope, operation, n) AS (
           (SELECT ${columns}, 1 FROM ${this.records} r WHERE ${from ? `${walked} > ${bound(from)}` : 'true'}${upTo} ORDER BY ${order} LIMIT 1)
           UNION ALL
           SELECT x.scope, x.operation, p.n + 1 FROM pairs p
             CROSS JOIN LATERAL (SELECT ${columns} FROM ${this.records} r WHERE ${walked} > ${operation ? 'p.scope' : '(p.scope, p.operation)'}${upTo} ORDER BY ${order} LIMIT 1) x
            WHERE p.n < ${KEY_SEARCH_WINDOW})`;
  }

  /** One record, everything it holds, with the lease judged on the database's clock. */
  detail(id: RecordId): Statement {
    return {
      text: `SELECT ${SUMMARY}, fingerprint, response_headers, response_body, owner_token, lease_expires_at,
                    coalesce(lease_expires_at > now(), false) AS lease_live, recovery_point, phase_results, resume, failure_reason, now() AS database_now,
                    ${this.runEffects}
               FROM ${this.records} r WHERE scope = $1 AND operation = $2 AND key = $3`,
      values: [id.scope, id.operation, id.key],
    };
  }

  /**
   * Phased claims that recorded no outcome, the longest lapsed lease first,
   * on the lease index. Only phased claims commit unfinished, and every one
   * has a lease until it records its outcome.
   */
  unfinished(filter: Pick<RecordFilter, 'scopes' | 'operation' | 'after'>, limit: number): Statement {
    const conditions = new Conditions();
    conditions.and(`lease_expires_at IS NOT NULL AND status = 'in_progress'`);
    if (filter.scopes) conditions.and(`scope = ANY(${conditions.param(filter.scopes)}::text[])`);
    if (filter.operation) conditions.and(`operation = ${conditions.param(filter.operation)}`);
    if (filter.after) {
      const at = `${conditions.param(filter.after.at)}::timestamptz`;
      const id = `(${conditions.param(filter.after.scope)}, ${conditions.param(filter.after.operation)}, ${conditions.param(filter.after.key)})`;
      conditions.and(`lease_expires_at >= ${at} AND (lease_expires_at > ${at} OR (scope, operation, key) > ${id})`);
    }
    return {
      text: `SELECT scope, operation, key, created_at, attempts, owner_token, lease_expires_at, lease_expires_at > now() AS lease_live, recovery_point,
                    resume->>'operation' AS resumes, ${phasesInOrder()} AS phases, ${positionOf('lease_expires_at')} AS position
               FROM ${this.records} ${conditions.where}
              ORDER BY lease_expires_at, scope, operation, key LIMIT ${conditions.param(limit)}`,
      values: conditions.values,
    };
  }

  /**
   * Locks the record for an action, or fails at once (SQLSTATE 55P03) when a
   * transaction in flight holds it: an action never waits behind a request.
   * With it, what its run did beyond the record, which a release judges.
   */
  lock(id: RecordId): Statement {
    return {
      text: `SELECT status, fingerprint, resume, recovery_point, lease_expires_at, coalesce(lease_expires_at > now(), false) AS lease_live,
                    ${this.runEffects}
               FROM ${this.records} r WHERE scope = $1 AND operation = $2 AND key = $3 FOR UPDATE NOWAIT`,
      values: [id.scope, id.operation, id.key],
    };
  }

  /** Deletes the locked record, and announces the release at commit (`RELEASED_CHANNEL`, the id as JSON, or `*` when too long for a notification). */
  release(id: RecordId): Statement {
    return {
      text: `WITH gone AS (DELETE FROM ${this.records} WHERE scope = $1 AND operation = $2 AND key = $3 RETURNING 1)
             SELECT (SELECT count(*) FROM gone)::int AS deleted, pg_notify('${RELEASED_CHANNEL}', $4) IS NULL AS notified`,
      values: [id.scope, id.operation, id.key, releasedPayload(id)],
    };
  }

  /**
   * Records the locked claim as failed, with the outcome every retry will
   * get, only while it is unfinished and its lease lapsed; the owner token
   * goes, so a stale owner's fenced writes match nothing. Retention counts
   * from now, as for any phased operation's ending.
   */
  fail(id: RecordId, outcome: { status: number; headers: string | null; body: string | null }, failureReason: string, retentionMs: number): Statement {
    return {
      text: `UPDATE ${this.records}
                SET status = 'failed', response_status = $4, response_headers = $5, response_body = $6, failure_reason = $7,
                    completed_at = now(), expires_at = now() + $8 * interval '1 millisecond', owner_token = NULL, lease_expires_at = NULL
              WHERE scope = $1 AND operation = $2 AND key = $3 AND status = 'in_progress' AND lease_expires_at <= now()
              RETURNING completed_at, expires_at`,
      values: [id.scope, id.operation, id.key, outcome.status, outcome.headers, outcome.body, failureReason, retentionMs],
    };
  }
}

/** PostgreSQL refuses a notification payload of 8000 bytes or more: a key that long is announced as "every key". */
const MAX_PAYLOAD_BYTES = 7900;

function releasedPayload(id: RecordId): string {
  const payload = JSON.stringify([id.scope, id.operation, id.key]);
  return Buffer.byteLength(payload) <= MAX_PAYLOAD_BYTES ? payload : '*';
}

// seq leaves as text (a bigint may exceed a JS number); statements order by the column, o.seq, never by that text.
const EVENT_COLUMNS = `o.id, o.seq::text AS seq, o.type, o.ordering_key, o.status, o.attempts, o.last_error, o.payload, o.headers, o.created_at, o.settled_at, o.next_attempt_at`;

/** The admin's SQL on `idempotency_outbox`: its lists, and the locks, checks and write of `requeue`. */
export class AdminOutboxStatements {
  private readonly outbox: string;

  constructor({ outbox }: ModuleTables) {
    this.outbox = outbox;
  }

  /**
   * Events in one state, oldest first, after `afterSeq`, on that state's
   * partial index. The state is spelled into the text, not a parameter, so
   * that the planner matches the index's predicate in any plan.
   */
  events(state: 'pending' | 'dead', afterSeq: string | undefined, limit: number): Statement {
    const status = state === 'dead' ? `'dead'` : `'pending'`;
    return {
      text: `SELECT ${EVENT_COLUMNS} FROM ${this.outbox} o WHERE o.status = ${status} AND o.seq > $1::bigint ORDER BY o.seq LIMIT $2`,
      values: [afterSeq ?? '0', limit],
    };
  }

  /** Locks the events asked for, or fails at once (55P03) when a transaction holds one (the reaper deleting it). */
  lock(ids: readonly string[]): Statement {
    return { text: `SELECT o.id, o.seq::text AS seq, o.status, o.ordering_key FROM ${this.outbox} o WHERE o.id = ANY($1::uuid[]) ORDER BY o.seq FOR UPDATE NOWAIT`, values: [ids] };
  }

  /** Every dead letter, locked, oldest first: requeueing all of them keeps each key's order by itself. */
  lockAllDead(): Statement {
    return { text: `SELECT o.id, o.seq::text AS seq, o.status, o.ordering_key FROM ${this.outbox} o WHERE o.status = 'dead' ORDER BY o.seq FOR UPDATE NOWAIT`, values: [] };
  }

  /**
   * Dead letters of the given keys, older than the newest one asked for of
   * the same key, that were not asked for: requeued without them, a newer
   * event would be published before an older one of its key.
   */
  leftBehind(keys: readonly string[], newestSeqs: readonly string[], ids: readonly string[]): Statement {
    return {
      text: `SELECT o.id, o.ordering_key, o.seq::text AS seq
               FROM unnest($1::text[], $2::bigint[]) AS k(ordering_key, newest_seq)
               JOIN ${this.outbox} o ON o.status = 'dead' AND o.ordering_key = k.ordering_key AND o.seq < k.newest_seq
              WHERE o.id <> ALL($3::uuid[])
              ORDER BY o.seq`,
      values: [keys, newestSeqs, ids],
    };
  }

  /** Puts the locked dead letters back in line with fresh attempts, and wakes the relays at commit. */
  requeue(ids: readonly string[]): Statement {
    return {
      text: `WITH requeued AS (
               UPDATE ${this.outbox} SET status = 'pending', attempts = 0, settled_at = NULL, next_attempt_at = now()
                WHERE id = ANY($1::uuid[]) AND status = 'dead' RETURNING 1)
             SELECT (SELECT count(*) FROM requeued)::int AS requeued, pg_notify('${OUTBOX_CHANNEL}', '') IS NULL AS notified`,
      values: [ids],
    };
  }
}

/**
 * The finished phases of a record (of the row `alias` names), in the order
 * they finished; for a record written before that order was kept, in
 * jsonb's order of `phase_results`.
 */
function phasesInOrder(alias?: string): string {
  const column = (name: string) => (alias ? `${alias}.${name}` : name);
  return `CASE WHEN jsonb_typeof(${column('resume')}->'phases') = 'array' THEN ARRAY(SELECT jsonb_array_elements_text(${column('resume')}->'phases'))
               ELSE ARRAY(SELECT jsonb_object_keys(${column('phase_results')})) END`;
}
