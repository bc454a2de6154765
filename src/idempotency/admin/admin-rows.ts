import { hashKey } from '../events/idempotency-events.js';
import type { RecordId, ResumeInfo } from '../records/stored-record.js';
import type { OutboxEventView, RecordDetail, RecordSummary, UnfinishedOperation } from './admin.types.js';
import { runEffectsOf, type RunEffectsRow } from './run-effects.js';

// The rows the admin's statements answer (admin.statements.ts), and the views it returns of them.

/** A record in a list, as the statements answer it. */
export type SummaryRow = RecordId & {
  status: RecordSummary['status'];
  response_status: number | null;
  created_at: Date;
  completed_at: Date | null;
  expires_at: Date;
  expired: boolean;
  attempts: number;
  position: string;
  /** The last claim a filtered search read, not a match: where the next page starts. */
  window_end?: boolean;
};
/**
 * A key search's row: a record found, or (`key` null) none, and the last
 * (scope, operation) pair a search across every scope walked when it walked
 * its whole window.
 */
export type KeySearchRow = (SummaryRow | { [column in keyof SummaryRow]: null }) & { window_scope: string | null; window_operation: string | null };
/** One record, everything it holds, and what its run did beyond it. */
export type DetailRow = SummaryRow & RunEffectsRow & {
  fingerprint: string;
  response_headers: Record<string, string> | null;
  response_body: string | null;
  owner_token: string | null;
  lease_expires_at: Date | null;
  lease_live: boolean;
  recovery_point: string | null;
  phase_results: Record<string, unknown>;
  resume: ResumeInfo | null;
  failure_reason: string | null;
  database_now: Date;
};
/** An unfinished phased claim. */
export type UnfinishedRow = RecordId & { created_at: Date; attempts: number; owner_token: string | null; lease_expires_at: Date; lease_live: boolean; recovery_point: string | null; resumes: string | null; phases: string[]; position: string };
/** An outbox event. */
export type EventRow = { id: string; seq: string; type: string; ordering_key: string | null; status: OutboxEventView['status']; attempts: number; last_error: string | null; payload: unknown; headers: Record<string, string>; created_at: Date; settled_at: Date | null; next_attempt_at: Date };

/** An unfinished claim's row, with where it stands: `registered` says whether this process could complete it, where known. */
export function unfinishedOf(row: UnfinishedRow, registered: ((operation: string) => boolean) | undefined): UnfinishedOperation {
  const state = row.lease_live ? 'running' : row.resumes === null ? 'unstarted' : 'abandoned';
  const registeredHere = row.resumes !== null && registered ? registered(row.resumes) : undefined;
  return {
    scope: row.scope,
    operation: row.operation,
    key: row.key,
    state,
    resumes: row.resumes,
    ...(registeredHere === undefined ? {} : { registeredHere }),
    recoveryPoint: row.recovery_point,
    phases: row.phases,
    attempts: row.attempts,
    ownerToken: row.owner_token,
    leaseExpiresAt: row.lease_expires_at,
    leaseLive: row.lease_live,
    createdAt: row.created_at,
    keyHash: hashKey(row),
  };
}

/** A record's summary, its key hashed as events name it. */
export function summaryOf(row: SummaryRow): RecordSummary {
  return {
    scope: row.scope,
    operation: row.operation,
    key: row.key,
    status: row.status,
    responseStatus: row.response_status,
    createdAt: row.created_at,
    completedAt: row.completed_at,
    expiresAt: row.expires_at,
    expired: row.expired,
    attempts: row.attempts,
    keyHash: hashKey(row),
  };
}

/** What a record's page shows besides its summary and answer. */
export function detailOf(row: DetailRow): Omit<RecordDetail, keyof RecordSummary | 'answer' | 'undecryptable'> {
  return {
    fingerprint: row.fingerprint,
    ownerToken: row.owner_token,
    leaseExpiresAt: row.lease_expires_at,
    leaseLive: row.lease_live,
    recoveryPoint: row.recovery_point,
    phaseResults: row.phase_results,
    resume: row.resume,
    failureReason: row.failure_reason,
    effects: runEffectsOf(row),
    databaseNow: row.database_now,
  };
}

/** An outbox event as the admin shows it. */
export function eventOf(row: EventRow): OutboxEventView {
  return {
    id: row.id,
    seq: row.seq,
    type: row.type,
    orderingKey: row.ordering_key,
    status: row.status,
    attempts: row.attempts,
    lastError: row.last_error,
    payload: row.payload,
    headers: row.headers,
    createdAt: row.created_at,
    settledAt: row.settled_at,
    nextAttemptAt: row.next_attempt_at,
  };
}
