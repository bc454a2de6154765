import { hashKey } from '../events/idempotency-events.js';
import type { AdminActionEvent } from '../events/idempotency-event.types.js';
import { IdempotencyRecordUndecryptableException } from '../errors/idempotency.exceptions.js';
import type { OutcomeCodec } from '../records/outcome-codec.js';
import type { RecordId } from '../records/stored-record.js';
import { assertSeesAll, assertVisible, scopesFor } from './admin-access.js';
import { checkEventIds, markFailed, releaseKey, requeueDead, type ActionSettings } from './admin-actions.js';
import { pageSize, recordCursor, recordPosition, seqCursor, seqPosition } from './admin-cursor.js';
import type { AdminDatabase } from './admin-database.js';
import { findKey } from './admin-key-search.js';
import { AdminProblemType, AdminRefusedException } from './admin.exceptions.js';
import { AdminOutboxStatements, AdminRecordStatements, type RecordFilter } from './admin.statements.js';
import { type DetailRow, detailOf, type EventRow, eventOf, type SummaryRow, summaryOf, type UnfinishedRow, unfinishedOf } from './admin-rows.js';
import type {
  AdminActionResult,
  AdminCaller,
  AdminPage,
  OutboxEventView,
  OutboxQuery,
  RecordDetail,
  RecordQuery,
  RecordSummary,
  UnfinishedOperation,
  UnfinishedQuery,
} from './admin.types.js';

/** How a release is asked for. */
export interface ReleaseOptions {
  /** Release a record whose run may have had external effects, knowing that a retry does them again. Default false. */
  force?: boolean;
}

/** What the admin needs besides its database. */
export interface AdminSettings {
  /** Opens recorded outcomes and seals the one `markFailed` records: the module's codec, plaintext accepted for reading. */
  codec: OutcomeCodec;
  /** Where each action's event goes (metrics and logs in the app; standard error in the CLI). */
  emit(event: AdminActionEvent): void;
  /** The module's retention, for a claim marked failed that stored none of its own. */
  retention: number;
  /** Whether this process registers a phased operation, so that its completer can finish it; omitted where unknown. */
  registered?(operation: string): boolean;
  /** Called once a release committed: this process drops the key's cached outcome at once, before the announcement reaches it. */
  released?(id: RecordId): void;
}

/**
 * What operators ask the library, and the three actions they may take:
 * records found by tenant scope, operation, key, status and time; unfinished
 * phased operations; outbox events by state; and releasing a key, marking an
 * unfinished operation failed, requeueing dead letters. Every list is a
 * keyset page on an index, every judgement (expired, lease live) the
 * database's clock, every action one transaction that refuses what would
 * break the guarantee and emits an `admin_action` event naming who asked and
 * why. `IdempotencyAdminModule` serves it over HTTP; the CLI on `DATABASE_URL`.
 *
 * @example
 * const caller = { actor: 'support:jo', scopes: [tenantScope('acme')] };
 * const { items } = await admin.findRecords({ scope: tenantScope('acme'), key: 'order-17' }, caller);
 * await admin.release(items[0], caller, 'customer retries with a corrected address');
 */
export class IdempotencyAdmin {
  constructor(
    private readonly database: AdminDatabase,
    private readonly settings: AdminSettings,
  ) {}

  /** Records newest first (by when their key was claimed), in the scopes the caller may see. */
  async findRecords(query: RecordQuery, caller: AdminCaller): Promise<AdminPage<RecordSummary>> {
    const limit = pageSize(query.limit);
    const filter: RecordFilter = { scopes: scopesFor(caller, query.scope), operation: query.operation || undefined, status: query.status, since: query.since, until: query.until };
    if (query.key) return findKey(this.database, this.records, { ...filter, key: query.key }, query.cursor, limit);
    const rows = await this.database.read<SummaryRow>(this.records.newest({ ...filter, after: query.cursor ? recordPosition(query.cursor) : undefined }, limit + 1));
    const cursorOf = (row: SummaryRow) => recordCursor({ at: row.position, scope: row.scope, operation: row.operation, key: row.key });
    const windowEnd = rows.find((row) => row.window_end);
    const page = pageOf(windowEnd ? rows.filter((row) => row !== windowEnd) : rows, limit, summaryOf, cursorOf);
    return windowEnd && !page.next ? { ...page, next: cursorOf(windowEnd), partial: true } : page;
  }

  /** One record with its decoded answer; refused for a scope the caller may not see, 404 when there is none. */
  async record(id: RecordId, caller: AdminCaller): Promise<RecordDetail> {
    assertVisible(caller, id.scope);
    const [row] = await this.database.read<DetailRow>(this.records.detail(id));
    if (!row) throw new AdminRefusedException(AdminProblemType.NotFound, `No record of key ${JSON.stringify(id.key)} for ${JSON.stringify(id.operation)} in ${JSON.stringify(id.scope)}.`);
    return { ...summaryOf(row), ...this.answerOf(row), ...detailOf(row) };
  }

  /** Phased operations that started and have not finished, the longest lapsed lease first. */
  async unfinished(query: UnfinishedQuery, caller: AdminCaller): Promise<AdminPage<UnfinishedOperation>> {
    const limit = pageSize(query.limit);
    const after = query.cursor ? recordPosition(query.cursor) : undefined;
    const rows = await this.database.read<UnfinishedRow>(this.records.unfinished({ scopes: scopesFor(caller, query.scope), operation: query.operation || undefined, after }, limit + 1));
    return pageOf(rows, limit, (row) => unfinishedOf(row, this.settings.registered), (row) => recordCursor({ at: row.position, scope: row.scope, operation: row.operation, key: row.key }));
  }

  /** Outbox events pending or dead, oldest first. Events carry no tenant: only a caller who sees every scope lists them. */
  async outboxEvents(query: OutboxQuery, caller: AdminCaller): Promise<AdminPage<OutboxEventView>> {
    assertSeesAll(caller);
    if (query.state !== 'pending' && query.state !== 'dead') throw new AdminRefusedException(AdminProblemType.BadRequest, `state must be pending or dead, got ${JSON.stringify(query.state)}.`);
    const limit = pageSize(query.limit);
    const rows = await this.database.read<EventRow>(this.outbox.events(query.state, query.cursor ? seqPosition(query.cursor) : undefined, limit + 1));
    return pageOf(rows, limit, eventOf, (row) => seqCursor(row.seq));
  }

  /**
   * Frees a key: deletes its record, so that the next request with it runs
   * as a new operation. Refused for a live lease and a record a transaction
   * holds right now; and, unless `force` is given, for a record whose run
   * may have had external effects (`RecordDetail.effects`: a started phased
   * operation, finished phases, outbox events), since a retry after the
   * release does them again: a second charge, a second order. Instances
   * running the admin module drop the key's cached outcome when the release commits.
   */
  release(id: RecordId, caller: AdminCaller, reason: string, { force = false }: ReleaseOptions = {}): Promise<AdminActionResult> {
    return this.audited('release', caller, reason, { operation: id.operation, keyHash: hashKey(id) }, async () => {
      const result = await releaseKey(this.database, id, caller, reason, force);
      this.settings.released?.(id);
      return result;
    });
  }

  /** Records an unfinished operation whose lease lapsed as failed: every retry then gets the `operation-failed` problem. */
  markFailed(id: RecordId, caller: AdminCaller, reason: string): Promise<AdminActionResult> {
    return this.audited('fail', caller, reason, { operation: id.operation, keyHash: hashKey(id) }, () => markFailed(this.database, this.actionSettings, id, caller, reason));
  }

  /** Puts dead letters back in line (`'all'`, or by id), refusing any that would be published before an older dead letter of its ordering key. */
  requeueDead(ids: readonly string[] | 'all', caller: AdminCaller, reason: string): Promise<AdminActionResult> {
    // Before the event is built: it names the ids, and only ids that are event ids go into an audit line.
    checkEventIds(ids);
    return this.audited('requeue', caller, reason, { eventIds: ids === 'all' ? [] : [...ids] }, () => {
      assertSeesAll(caller);
      return requeueDead(this.database, ids, caller, reason);
    });
  }

  private get records(): AdminRecordStatements {
    return new AdminRecordStatements(this.database.tables());
  }

  private get outbox(): AdminOutboxStatements {
    return new AdminOutboxStatements(this.database.tables());
  }

  private get actionSettings(): ActionSettings {
    return { codec: this.settings.codec, retention: this.settings.retention };
  }

  /** Runs an action and emits its event, done or refused; any other failure (the database gone) changed nothing and is rethrown. */
  private async audited(
    action: AdminActionEvent['action'],
    caller: AdminCaller,
    reason: string,
    target: Pick<AdminActionEvent, 'operation' | 'keyHash' | 'eventIds'>,
    run: () => Promise<AdminActionResult>,
  ): Promise<AdminActionResult> {
    const event: AdminActionEvent = { kind: 'admin_action', action, result: 'done', actor: caller.actor, reason, ...target };
    try {
      checkAction(caller, reason);
      const result = await run();
      this.settings.emit({ ...event, ...(result.forced ? { forced: true } : {}), ...(result.eventIds ? { eventIds: result.eventIds } : {}) });
      return result;
    } catch (error) {
      if (error instanceof AdminRefusedException) this.settings.emit({ ...event, result: 'refused', refusal: error.problem.type });
      throw error;
    }
  }

  private answerOf(row: DetailRow): Pick<RecordDetail, 'answer' | 'undecryptable'> {
    if (row.status === 'in_progress' || row.response_status === null) return { answer: null };
    try {
      const outcome = this.settings.codec.decode(row, { ...row, response_status: row.response_status });
      return { answer: { ...outcome, sealed: row.response_headers === null } };
    } catch (error) {
      if (error instanceof IdempotencyRecordUndecryptableException) return { answer: null, undecryptable: error.reason };
      throw error;
    }
  }

}

/** Who and why, before anything is read: an action without them cannot be audited. */
function checkAction(caller: AdminCaller, reason: string): void {
  if (!caller.actor?.trim()) throw new AdminRefusedException(AdminProblemType.BadRequest, 'An action needs the name of who asks for it (the admin module\'s `actor`, the CLI\'s --as).');
  if (typeof reason !== 'string' || !reason.trim()) throw new AdminRefusedException(AdminProblemType.BadRequest, 'An action needs a reason: it goes into the audit event with who asked.');
  if (reason.length > 1000) throw new AdminRefusedException(AdminProblemType.BadRequest, 'A reason is at most 1000 characters.');
}

/** The first `limit` rows as items, and the cursor after the last one when one more row was there. */
function pageOf<Row, Item>(rows: Row[], limit: number, item: (row: Row) => Item, cursor: (row: Row) => string): AdminPage<Item> {
  const items = rows.slice(0, limit);
  return rows.length > limit ? { items: items.map(item), next: cursor(items[items.length - 1]) } : { items: items.map(item) };
}
