import type { IdempotencyAdmin } from '../admin/idempotency-admin.js';
import type { AdminActionResult, AdminCaller } from '../admin/admin.types.js';
import { releaseConsequences } from '../admin/run-effects.js';
import { terminalText } from './terminal-text.js';
import type { RecordId } from '../records/stored-record.js';
import type { CliStreams } from './cli-output.js';

/**
 * `release`: says on standard error, before the action, what the release
 * leaves in place and what the next request with the key does after it,
 * then releases. A record whose run may have had external effects needs
 * `force`; without it the release is refused, and the refusal says the same.
 */
export async function releaseFromCli(admin: IdempotencyAdmin, streams: CliStreams, id: RecordId, { caller, reason, force }: { caller: AdminCaller; reason: string; force: boolean }): Promise<AdminActionResult> {
  // A read to warn with, not to decide on: the release judges the record again under its lock, and
  // answers any failure of this read (no such record, the database gone) itself.
  const record = await admin.record(id, caller).catch(() => undefined);
  if (record && (force || !record.effects.external)) {
    streams.err(terminalText(`${record.effects.external ? 'Forcing the release' : 'Releasing'}: ${releaseConsequences(record.status, record.effects)}`));
  }
  return admin.release(id, caller, reason, { force });
}
