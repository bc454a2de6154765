import type { AdminDatabase } from './admin-database.js';
import { type KeySearchPosition, keySearchCursor, keySearchPosition, recordCursor, recordPosition, type ScopePair } from './admin-cursor.js';
import type { AdminRecordStatements, RecordFilter } from './admin.statements.js';
import { type KeySearchRow, type SummaryRow, summaryOf } from './admin-rows.js';
import type { AdminPage, RecordSummary } from './admin.types.js';

/**
 * The records of one key, newest first, a page at a time. In the scopes a
 * caller lists, every pair of them is looked up; across every scope the
 * search walks a window of (scope, operation) pairs per page, however many
 * tenants there are, and says so (`partial`) when the window ran out before
 * the page filled: `next` walks the following pairs.
 */
export async function findKey(
  database: AdminDatabase,
  records: AdminRecordStatements,
  filter: Omit<RecordFilter, 'after'> & { key: string },
  cursor: string | undefined,
  limit: number,
): Promise<AdminPage<RecordSummary>> {
  const everywhere = filter.scopes === undefined;
  const position: KeySearchPosition = cursor === undefined ? {} : everywhere ? keySearchPosition(cursor) : { after: recordPosition(cursor) };
  const rows = await database.read<KeySearchRow>(records.byKey({ ...filter, after: position.after }, limit + 1, position));
  const found = rows.filter((row): row is SummaryRow & KeySearchRow => row.key !== null);
  const items = found.slice(0, limit);
  const walked = windowEndOf(rows[0]) ?? position.to;
  if (found.length > limit) {
    const last = items[items.length - 1];
    const after = { at: last.position, scope: last.scope, operation: last.operation, key: last.key };
    return { items: items.map(summaryOf), next: everywhere ? keySearchCursor({ from: position.from, to: walked, after }) : recordCursor(after) };
  }
  return walked ? { items: items.map(summaryOf), next: keySearchCursor({ from: walked }), partial: true } : { items: items.map(summaryOf) };
}

function windowEndOf(row: KeySearchRow | undefined): ScopePair | undefined {
  return row?.window_scope == null || row.window_operation == null ? undefined : { scope: row.window_scope, operation: row.window_operation };
}
