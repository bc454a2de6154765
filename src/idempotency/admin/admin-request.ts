import { Inject, Injectable } from '@nestjs/common';
import type { IdempotencyRecordStatus } from '../records/idempotency-record.entity.js';
import type { RecordId } from '../records/stored-record.js';
import { AdminProblemType, AdminRefusedException } from './admin.exceptions.js';
import type { ResolvedAdminOptions } from './admin.options.js';
import { RESOLVED_ADMIN_OPTIONS } from './admin.tokens.js';
import type { AdminCaller, OutboxQuery, RecordQuery, UnfinishedQuery } from './admin.types.js';

/** A query string or JSON body, as the adapter parsed it. */
export type Params = Record<string, unknown>;

const STATUSES: readonly IdempotencyRecordStatus[] = ['in_progress', 'completed', 'failed'];

/** The caller of an admin request: who (`actor`) and which scopes (`scopes`), as the module's options say. */
@Injectable()
export class AdminCallers {
  constructor(@Inject(RESOLVED_ADMIN_OPTIONS) private readonly options: ResolvedAdminOptions) {}

  async of(request: unknown): Promise<AdminCaller> {
    const scopes = await this.options.scopes(request);
    if (scopes !== 'all' && !Array.isArray(scopes)) throw new TypeError(`IdempotencyAdminModule: scopes() must answer 'all' or a list of scopes, got ${JSON.stringify(scopes)}`);
    const actor = this.options.actor(request) ?? '';
    // An actor may come from free text (a Basic user name), and `fail` writes it into failure_reason, where a NUL fails the statement.
    if (actor.includes('\0')) throw bad('The actor this request names (the admin module\'s `actor`) holds a NUL character: sign in under another name.');
    return { actor, scopes };
  }
}

/**
 * A text parameter, absent when empty; anything but one string is a bad
 * request, and so is a NUL character: PostgreSQL's text cannot hold one, so
 * no record, scope or reason has one, and the statement would fail.
 */
export function text(params: Params, name: string): string | undefined {
  const value = params[name];
  if (value === undefined || value === '') return undefined;
  if (typeof value !== 'string') throw bad(`${name} must be given once, as text.`);
  if (value.includes('\0')) throw bad(`${name} holds a NUL character, which PostgreSQL's text cannot store: no record has one.`);
  return value;
}

/** The record a request names: scope, operation and key, all three required. */
export function recordIdOf(params: Params): RecordId {
  const [scope, operation, key] = ['scope', 'operation', 'key'].map((name) => {
    const value = text(params, name);
    if (value === undefined) throw bad(`${name} is required: a record is named by scope, operation and key.`);
    return value;
  });
  return { scope, operation, key };
}

/** A record search from a query string: `scope`, `operation`, `key`, `status`, `since`, `until`, `limit`, `cursor`. */
export function recordQueryOf(params: Params): RecordQuery {
  const status = text(params, 'status');
  if (status !== undefined && !STATUSES.includes(status as IdempotencyRecordStatus)) throw bad(`status must be one of ${STATUSES.join(', ')}, got ${JSON.stringify(status)}.`);
  return {
    scope: text(params, 'scope'),
    operation: text(params, 'operation'),
    key: text(params, 'key'),
    status: status as IdempotencyRecordStatus | undefined,
    since: instant(params, 'since'),
    until: instant(params, 'until'),
    ...pageOf(params),
  };
}

/** The unfinished operations asked for: `scope`, `operation`, `limit`, `cursor`. */
export function unfinishedQueryOf(params: Params): UnfinishedQuery {
  return { scope: text(params, 'scope'), operation: text(params, 'operation'), ...pageOf(params) };
}

/** The outbox events asked for: `state` (default `dead`), `limit`, `cursor`. */
export function outboxQueryOf(params: Params): OutboxQuery {
  return { state: (text(params, 'state') ?? 'dead') as OutboxQuery['state'], ...pageOf(params) };
}

/** The reason an action body gives. */
export function reasonOf(params: Params): string {
  return text(params, 'reason') ?? '';
}

/** Whether a release is forced: `force: true` (or the text `true`, as a form sends it). */
export function forceOf(params: Params): boolean {
  return params.force === true || params.force === 'true';
}

/** The dead letters a requeue names: `ids` (a list, or one id), or `all: true`. */
export function eventIdsOf(params: Params): readonly string[] | 'all' {
  if (params.all === true || params.all === 'true') return 'all';
  const ids = typeof params.ids === 'string' ? [params.ids] : params.ids;
  if (!Array.isArray(ids) || !ids.every((id) => typeof id === 'string')) throw bad('Name the dead letters as `ids`, a list of event ids, or send `all: true`.');
  return ids;
}

function pageOf(params: Params): { cursor?: string; limit?: number } {
  const limit = text(params, 'limit');
  return { cursor: text(params, 'cursor'), limit: limit === undefined ? undefined : Number(limit) };
}

/** An ISO 8601 date, with a time and a zone or not: what `Date` would also take in other shapes (`2020`, `June 1`) is refused. */
const ISO_INSTANT = /^(\d{4}-\d\d-\d\d)(?:[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?)?([zZ]|[+-]\d\d:?\d\d)?$/;

/**
 * An ISO 8601 instant from year 1 to 9999; one without a zone is read as
 * UTC, as the page's fields give it. `Date` reaches years PostgreSQL's
 * timestamptz does not (-271821), and rolls 2025-02-30 over to March.
 */
function instant(params: Params, name: string): Date | undefined {
  const value = text(params, name);
  if (value === undefined) return undefined;
  const [, day, zone] = ISO_INSTANT.exec(value) ?? [];
  const date = new Date(zone ? value : `${value}Z`);
  const year = date.getUTCFullYear();
  if (day === undefined || Number.isNaN(date.getTime()) || year < 1 || year > 9999 || !isCalendarDay(day)) {
    throw bad(`${name} must be an ISO 8601 instant from year 1 to 9999, e.g. 2025-06-01T12:00:00Z; got ${JSON.stringify(value)}.`);
  }
  return date;
}

/** Whether `YYYY-MM-DD` names a day of the calendar, not one `Date` would roll over. */
function isCalendarDay(day: string): boolean {
  const date = new Date(`${day}T00:00:00Z`);
  return !Number.isNaN(date.getTime()) && date.toISOString().slice(0, 10) === day;
}

const bad = (detail: string) => new AdminRefusedException(AdminProblemType.BadRequest, detail);
