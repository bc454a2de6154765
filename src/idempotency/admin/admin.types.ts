import type { IdempotencyRecordStatus } from '../records/idempotency-record.entity.js';
import type { RecordUndecryptableReason } from '../errors/idempotency.exceptions.js';
import type { RecordId, ResumeInfo } from '../records/stored-record.js';

/**
 * Who is asking, as the admin module's options resolve it from a request (or
 * the CLI from its flags): named in every action's event, and limited to the
 * tenant scopes it may see.
 */
export interface AdminCaller {
  /** Who asked: recorded with every action, e.g. an operator's login. */
  actor: string;
  /** The scopes the caller may see and act on (`tenantScope()`), or `'all'`. */
  scopes: 'all' | readonly string[];
}

/** One page of a list, and the cursor of the next one (absent on the last page). */
export interface AdminPage<Item> {
  items: Item[];
  next?: string;
  /**
   * The search stopped early, with fewer matches than a page: a search for
   * a status or an operation after reading its window of claims
   * (`SEARCH_WINDOW`, newest first), `next` carrying on with older claims; a
   * key searched in every scope after walking its window of scopes and
   * operations (`KEY_SEARCH_WINDOW`), `next` walking the following ones.
   * Either may find more.
   */
  partial?: true;
}

/** How a list is paged: at most `limit` items (default 50, at most 200) after `cursor`. */
export interface PageRequest {
  cursor?: string;
  limit?: number;
}

/** Which records to find. Every field narrows; none finds the newest records of every scope the caller may see. */
export interface RecordQuery extends PageRequest {
  /** One tenant scope, e.g. `tenant:acme`. */
  scope?: string;
  operation?: string;
  key?: string;
  status?: IdempotencyRecordStatus;
  /** Claimed at or after this instant. */
  since?: Date;
  /** Claimed before this instant. */
  until?: Date;
}

/** A record in a list: newest claims first. */
export interface RecordSummary extends RecordId {
  status: IdempotencyRecordStatus;
  /** The status the record answers (replays); null while unfinished. */
  responseStatus: number | null;
  /** When its key was claimed: the start of this run of the key. */
  createdAt: Date;
  completedAt: Date | null;
  expiresAt: Date;
  /** Expired by the database's clock: a request with its key runs anew; the reaper deletes it. */
  expired: boolean;
  /** How many owners a phased operation has had. */
  attempts: number;
  /** The key as events and logs name it. */
  keyHash: string;
}

/** The outcome a record replays, decoded (opened, when sealed at rest). */
export interface RecordAnswer {
  status: number;
  headers: Record<string, string>;
  body: string | null;
  /** Stored sealed (encryption at rest), rather than in plaintext. */
  sealed: boolean;
}

/** Everything a record holds, for one record's page. */
export interface RecordDetail extends RecordSummary {
  /** SHA-256 of the request's canonical fields: a retry with another request gets 422. */
  fingerprint: string;
  /** The answer, or null while unfinished or when it cannot be opened (`undecryptable`). */
  answer: RecordAnswer | null;
  undecryptable?: RecordUndecryptableReason;
  /** Phased operations: the owner holding the lease, until when, and whether that is still ahead. */
  ownerToken: string | null;
  leaseExpiresAt: Date | null;
  leaseLive: boolean;
  /** The last finished phase, and every finished phase's stored result. */
  recoveryPoint: string | null;
  phaseResults: Record<string, unknown>;
  /** The operation and input a phased claim resumes with; null before `claim.run()`. */
  resume: ResumeInfo | null;
  failureReason: string | null;
  /** What its run did beyond the record, which a release leaves in place: `external` says a release needs `force`. */
  effects: RunEffects;
  /** The database's clock when the record was read. */
  databaseNow: Date;
}

/**
 * What a record's run did, or may have done, beyond the record itself: a
 * release deletes the record and nothing else, so all of it stays, and the
 * next request with the key does it again as a new run.
 */
export interface RunEffects {
  /** The phased operation it ran (`claim.run()` stored its input), or null: a one-transaction flow, or a claim that never started. */
  operation: string | null;
  /** Finished phases, in no particular order. */
  phases: string[];
  recoveryPoint: string | null;
  /** Outbox events its run added, by state (the first 64 of each of its transactions, found by their derived ids). */
  events: { sent: number; pending: number; dead: number };
  /**
   * Whether any of it may have reached outside the database: a started
   * phased operation (a phase that was running may have had its effect
   * without recording it), a finished phase, or an outbox event, sent or
   * still to be. Releasing such a record needs `force`.
   */
  external: boolean;
}

/** Which unfinished phased operations to list, longest lapsed lease first. */
export interface UnfinishedQuery extends PageRequest {
  scope?: string;
  operation?: string;
}

/** Where an unfinished operation stands, from its lease and its stored input. */
export type UnfinishedState =
  | 'running' // its owner holds a live lease
  | 'abandoned' // started, lease lapsed: the completer (a process registering its operation) or a retry resumes it
  | 'unstarted'; // lease lapsed before `claim.run()`: the completer discards it, nothing can have happened

/** A phased claim that has not recorded an outcome. */
export interface UnfinishedOperation extends RecordId {
  state: UnfinishedState;
  /** The phased operation it runs (`@PhasedOperation(name)`); null before `claim.run()`. */
  resumes: string | null;
  /** Whether this process registers that operation, so that its completer can finish it; absent where unknown (the CLI). */
  registeredHere?: boolean;
  recoveryPoint: string | null;
  /** Finished phases, in no particular order. */
  phases: string[];
  attempts: number;
  ownerToken: string | null;
  leaseExpiresAt: Date;
  leaseLive: boolean;
  createdAt: Date;
  keyHash: string;
}

/** Outbox events in one state: `pending` (waiting for the relay) or `dead` (out of attempts). */
export interface OutboxQuery extends PageRequest {
  state: 'pending' | 'dead';
}

/** An outbox event, oldest (`seq`) first. */
export interface OutboxEventView {
  id: string;
  seq: string;
  type: string;
  orderingKey: string | null;
  status: 'pending' | 'sent' | 'dead';
  attempts: number;
  lastError: string | null;
  payload: unknown;
  headers: Record<string, string>;
  createdAt: Date;
  settledAt: Date | null;
  nextAttemptAt: Date;
}

/** What an action did. */
export interface AdminActionResult {
  action: 'release' | 'fail' | 'requeue';
  actor: string;
  reason: string;
  /** `release` and `fail`: the record acted on. */
  record?: RecordId & { keyHash: string };
  /** `release`: what the released record's run left in place, as the release found it. */
  effects?: RunEffects;
  /** `release`: released although its run may have had external effects, because the operator said `force`. */
  forced?: true;
  /** `requeue`: the events put back in line, oldest first. */
  eventIds?: string[];
}
