import { AdminProblemType, AdminRefusedException } from './admin.exceptions.js';

/**
 * Where a keyset page ends, as the next page's cursor: the ordering column
 * as the database printed it (to the microsecond, so that no row is skipped
 * or repeated), then the primary key that breaks ties.
 */
export interface RecordPosition {
  at: string;
  scope: string;
  operation: string;
  key: string;
}

/** Page sizes: the default, and the most a caller may ask for. */
export const DEFAULT_PAGE = 50;
export const MAX_PAGE = 200;

/** The opaque cursor of a record position: base64url of its JSON. */
export function recordCursor({ at, scope, operation, key }: RecordPosition): string {
  return Buffer.from(JSON.stringify([at, scope, operation, key])).toString('base64url');
}

/** The position a cursor names; a cursor this module did not make is a bad request. */
export function recordPosition(cursor: string): RecordPosition {
  const parts = parse(cursor);
  if (!Array.isArray(parts) || parts.length !== 4 || !parts.every((part) => typeof part === 'string') || Number.isNaN(Date.parse(parts[0]))) throw badCursor();
  const [at, scope, operation, key] = parts as string[];
  return { at, scope, operation, key };
}

/** The cursor after an outbox event: its `seq`. */
export function seqCursor(seq: string): string {
  return Buffer.from(JSON.stringify([seq])).toString('base64url');
}

/** The `seq` an outbox cursor names; a cursor this module did not make is a bad request. */
export function seqPosition(cursor: string): string {
  const parts = parse(cursor);
  if (!Array.isArray(parts) || parts.length !== 1 || typeof parts[0] !== 'string' || !/^\d{1,19}$/.test(parts[0])) throw badCursor();
  return parts[0];
}

/** A page size within bounds: 1 to `MAX_PAGE`, `DEFAULT_PAGE` when absent. */
export function pageSize(limit: number | undefined): number {
  if (limit === undefined) return DEFAULT_PAGE;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE) {
    throw new AdminRefusedException(AdminProblemType.BadRequest, `limit must be an integer from 1 to ${MAX_PAGE}, got ${limit}.`);
  }
  return limit;
}

function parse(cursor: string): unknown {
  try {
    return JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw badCursor();
  }
}

const badCursor = () => new AdminRefusedException(AdminProblemType.BadRequest, 'The cursor is not one this admin gave out: pass a list\'s `next` as it came.');
