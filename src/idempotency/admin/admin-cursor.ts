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

/** A tenant scope and an operation: the leading columns of the records' primary key, which a key search walks. */
export interface ScopePair {
  scope: string;
  operation: string;
}

/**
 * Where a key search across every scope stands: it walks the (scope,
 * operation) pairs a window at a time (`KEY_SEARCH_WINDOW`), so a page
 * names the window (after `from`, up to `to` once a page found its end) and
 * the last record it answered of that window (`after`).
 */
export interface KeySearchPosition {
  from?: ScopePair;
  to?: ScopePair;
  after?: RecordPosition;
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
  return positionOf(parse(cursor));
}

function positionOf(parts: unknown): RecordPosition {
  if (!Array.isArray(parts) || parts.length !== 4 || !parts.every(isStorableText) || !isPrintedInstant(parts[0])) throw badCursor();
  const [at, scope, operation, key] = parts as string[];
  return { at, scope, operation, key };
}

/** The opaque cursor of a key search across every scope. */
export function keySearchCursor({ from, to, after }: KeySearchPosition): string {
  const pair = (at?: ScopePair) => (at ? [at.scope, at.operation] : null);
  return Buffer.from(JSON.stringify(['pairs', pair(from), pair(to), after ? [after.at, after.scope, after.operation, after.key] : null])).toString('base64url');
}

/** The position a key search's cursor names; any other cursor is a bad request. */
export function keySearchPosition(cursor: string): KeySearchPosition {
  const parts = parse(cursor);
  if (!Array.isArray(parts) || parts.length !== 4 || parts[0] !== 'pairs') throw badCursor();
  const [, from, to, after] = parts as unknown[];
  const pair = (part: unknown): ScopePair | undefined => {
    if (part === null) return undefined;
    if (!Array.isArray(part) || part.length !== 2 || !part.every(isStorableText)) throw badCursor();
    return { scope: part[0], operation: part[1] };
  };
  return { from: pair(from), to: pair(to), after: after === null ? undefined : positionOf(after) };
}

/** The cursor after an outbox event: its `seq`. */
export function seqCursor(seq: string): string {
  return Buffer.from(JSON.stringify([seq])).toString('base64url');
}

/** The largest `seq` a bigint holds. */
const MAX_SEQ = 2n ** 63n - 1n;

/** The `seq` an outbox cursor names; a cursor this module did not make is a bad request. */
export function seqPosition(cursor: string): string {
  const parts = parse(cursor);
  if (!Array.isArray(parts) || parts.length !== 1 || typeof parts[0] !== 'string' || !/^\d{1,19}$/.test(parts[0]) || BigInt(parts[0]) > MAX_SEQ) throw badCursor();
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

/** Text PostgreSQL can take as a parameter: a string without NUL. */
function isStorableText(part: unknown): part is string {
  return typeof part === 'string' && !part.includes('\0');
}

/**
 * An instant as the statements print positions (`to_char`, to the
 * microsecond, in UTC), of a real calendar day: `Date.parse` takes `2020`
 * and rolls February 30 over, timestamptz refuses both.
 */
function isPrintedInstant(at: string): boolean {
  if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/.test(at)) return false;
  const date = new Date(at);
  return !Number.isNaN(date.getTime()) && date.getUTCFullYear() >= 1 && date.toISOString().slice(0, 19) === at.slice(0, 19);
}

function parse(cursor: string): unknown {
  try {
    return JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw badCursor();
  }
}

const badCursor = () => new AdminRefusedException(AdminProblemType.BadRequest, 'The cursor is not one this admin gave out: pass a list\'s `next` as it came.');
