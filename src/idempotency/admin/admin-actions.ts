import { isLockTimeout } from '../driver/database-errors.js';
import { hashKey } from '../events/idempotency-events.js';
import { operationFailedOutcome } from '../errors/idempotency.exceptions.js';
import type { OutcomeCodec } from '../records/outcome-codec.js';
import type { RecordId } from '../records/stored-record.js';
import { assertVisible } from './admin-access.js';
import type { AdminDatabase, AdminQuery } from './admin-database.js';
import { AdminProblemType, AdminRefusedException } from './admin.exceptions.js';
import { AdminOutboxStatements, AdminRecordStatements } from './admin.statements.js';
import type { AdminActionResult, AdminCaller } from './admin.types.js';
import { releaseRefusal, runEffectsOf, type RunEffectsRow } from './run-effects.js';

/** What the record actions need besides the database. */
export interface ActionSettings {
  codec: OutcomeCodec;
  retention: number;
}

/** The record as an action finds it, locked, with what its run did beyond it. */
interface LockedRecord extends RunEffectsRow {
  status: 'in_progress' | 'completed' | 'failed';
  fingerprint: string;
  lease_expires_at: Date | null;
  lease_live: boolean;
}

interface LockedEvent {
  id: string;
  seq: string;
  status: string;
  ordering_key: string | null;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Deletes a record whose lease is not live; one whose run may have had
 * external effects only when the operator forces it. See `IdempotencyAdmin.release`.
 */
export async function releaseKey(database: AdminDatabase, id: RecordId, caller: AdminCaller, reason: string, force: boolean): Promise<AdminActionResult> {
  assertVisible(caller, id.scope);
  const records = new AdminRecordStatements(database.tables());
  const effects = await database.transaction(async (query) => {
    const record = await lockRecord(query, records, id);
    if (record.status === 'in_progress') refuseLiveLease(record);
    const effects = runEffectsOf(record);
    if (effects.external && !force) throw new AdminRefusedException(AdminProblemType.OperationStarted, releaseRefusal(record.status, effects));
    await query(records.release(id));
    return effects;
  });
  return { action: 'release', actor: caller.actor, reason, record: { ...id, keyHash: hashKey(id) }, effects, ...(effects.external ? { forced: true as const } : {}) };
}

/** Records an unfinished operation whose lease lapsed as failed; see `IdempotencyAdmin.markFailed`. */
export async function markFailed(database: AdminDatabase, settings: ActionSettings, id: RecordId, caller: AdminCaller, reason: string): Promise<AdminActionResult> {
  assertVisible(caller, id.scope);
  const records = new AdminRecordStatements(database.tables());
  await database.transaction(async (query) => {
    const record = await lockRecord(query, records, id);
    if (record.status !== 'in_progress') {
      throw new AdminRefusedException(AdminProblemType.NotUnfinished, `The record is ${record.status}: only an unfinished phased operation can be marked failed.`);
    }
    refuseLiveLease(record);
    const where = `recovery point ${record.recovery_point ?? '(start)'}`;
    // The client's problem names no operator and quotes nothing they typed; the record's failure_reason keeps both.
    const outcome = settings.codec.encode({ id, fingerprint: record.fingerprint }, operationFailedOutcome(`an operator marked it failed at ${where}`));
    const failureReason = `marked failed by ${caller.actor} at ${where}: ${reason}`;
    const [failed] = await query(records.fail(id, outcome, failureReason, record.resume?.retention ?? settings.retention));
    // The row is locked and was checked: only a lease that lapsed exactly now could make the statement miss it.
    if (!failed) refuseLiveLease({ ...record, lease_live: true });
  });
  return { action: 'fail', actor: caller.actor, reason, record: { ...id, keyHash: hashKey(id) } };
}

/** The dead letters a requeue names: some event ids, or all; anything else is a bad request, refused before an event names it. */
export function checkEventIds(ids: readonly string[] | 'all'): void {
  if (ids === 'all') return;
  if (ids.length === 0) throw new AdminRefusedException(AdminProblemType.BadRequest, 'Name the dead letters to requeue, or ask for all of them.');
  const malformed = ids.filter((id) => !UUID.test(id));
  if (malformed.length) throw new AdminRefusedException(AdminProblemType.BadRequest, `Not event ids: ${malformed.map((id) => JSON.stringify(id)).join(', ')}.`);
}

/** Puts dead letters back in line, keeping each ordering key's order; see `IdempotencyAdmin.requeueDead`, which checked the ids. */
export async function requeueDead(database: AdminDatabase, ids: readonly string[] | 'all', caller: AdminCaller, reason: string): Promise<AdminActionResult> {
  const outbox = new AdminOutboxStatements(database.tables());
  const requeued = await database.transaction(async (query) => {
    const events = await lockOrRefuse(() => query<LockedEvent>(ids === 'all' ? outbox.lockAllDead() : outbox.lock([...new Set(ids)])));
    if (ids !== 'all') checkRequeue(events, new Set(ids), await query<LockedEvent>(leftBehindOf(outbox, events)));
    if (events.length) await query(outbox.requeue(events.map((event) => event.id)));
    return events.map((event) => event.id);
  });
  return { action: 'requeue', actor: caller.actor, reason, eventIds: requeued };
}

async function lockRecord(query: AdminQuery, records: AdminRecordStatements, id: RecordId): Promise<LockedRecord> {
  const [record] = await lockOrRefuse(() => query<LockedRecord>(records.lock(id)));
  if (!record) throw new AdminRefusedException(AdminProblemType.NotFound, `No record of key ${JSON.stringify(id.key)} for ${JSON.stringify(id.operation)} in ${JSON.stringify(id.scope)}.`);
  return record;
}

/** A row a transaction in flight holds is refused at once, never waited for. */
async function lockOrRefuse<Row>(lock: () => Promise<Row[]>): Promise<Row[]> {
  try {
    return await lock();
  } catch (error) {
    if (!isLockTimeout(error)) throw error;
    throw new AdminRefusedException(AdminProblemType.KeyInUse, 'A transaction in flight holds it (a request, a phase, the relay or the reaper): nothing was changed. Try again in a moment.');
  }
}

function refuseLiveLease(record: LockedRecord): void {
  if (!record.lease_live) return;
  throw new AdminRefusedException(
    AdminProblemType.LeaseLive,
    `Its owner holds the lease until ${record.lease_expires_at?.toISOString()} (database clock) and may be working: wait for it to finish or for the lease to lapse.`,
  );
}

/** The query for dead letters an action would leave behind: older than the newest asked for of each key. */
function leftBehindOf(outbox: AdminOutboxStatements, events: readonly LockedEvent[]) {
  const newest = new Map<string, string>();
  for (const event of events) if (event.ordering_key !== null) newest.set(event.ordering_key, event.seq); // locked in seq order
  return outbox.leftBehind([...newest.keys()], [...newest.values()], events.map((event) => event.id));
}

function checkRequeue(events: readonly LockedEvent[], asked: ReadonlySet<string>, leftBehind: readonly LockedEvent[]): void {
  const found = new Set(events.map((event) => event.id));
  const missing = [...asked].filter((id) => !found.has(id));
  if (missing.length) throw new AdminRefusedException(AdminProblemType.NotFound, `No outbox event ${missing.join(', ')}.`);
  const alive = events.filter((event) => event.status !== 'dead');
  if (alive.length) throw new AdminRefusedException(AdminProblemType.NotDead, `Not dead letters: ${alive.map((event) => `${event.id} (${event.status})`).join(', ')}. Only dead letters are requeued.`);
  if (leftBehind.length) {
    const named = leftBehind.map((event) => `${event.id} (key ${JSON.stringify(event.ordering_key)}, seq ${event.seq})`).join(', ');
    throw new AdminRefusedException(
      AdminProblemType.OutOfOrder,
      `Older dead letters of the same ordering key would stay dead and be published after newer ones: ${named}. Requeue them together (or all dead letters).`,
    );
  }
}
