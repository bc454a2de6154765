import type { RecordUndecryptableReason } from '../errors/idempotency.exceptions.js';

// The events' shapes, apart from the service that emits them, so the module
// options (`onEvent`) and the channels can name them without importing it.

/** How one request to an idempotent route ended. */
export type AttemptOutcome =
  | 'executed' // the handler ran and its outcome was recorded: one logical operation
  | 'replayed'
  | 'conflict' // 409: still in flight after the wait
  | 'key_reused' // 422: fingerprint mismatch
  | 'key_missing'
  | 'key_malformed'
  | 'not_canonical'
  | 'tenant_unresolved' // 401: the tenant resolver found no tenant; nothing was claimed
  | 'rolled_back' // the handler failed; nothing was recorded
  | 'unavailable' // 503: the database connection was lost
  | 'undecryptable'; // 500: the key's recorded outcome does not decrypt (see `undecryptable`), so it was not replayed

/** One physical attempt: every request with (or missing) a key produces exactly one. */
export interface AttemptEvent {
  kind: 'attempt';
  operation: string;
  outcome: AttemptOutcome;
  /** SHA-256 prefix of scope, operation and key: never the key itself. */
  keyHash?: string;
  /** It ran into a concurrent owner's claim (then replayed, or got 409). */
  collided: boolean;
  /** It took a record over: an expired one, or a phased claim whose lease lapsed. */
  tookOver?: 'expired' | 'lease';
  /** Time spent claiming, waits on a concurrent owner included. */
  claimMs?: number;
  handlerMs?: number;
  /** The HTTP status answered. */
  status?: number;
  /** Why the recorded outcome could not be read, for outcome `undecryptable`. */
  undecryptable?: RecordUndecryptableReason;
  /** When each step ran: what tracing builds its spans from. */
  timeline?: AttemptTimeline;
}

/**
 * When an attempt's steps ran, as `performance.now()` readings (milliseconds
 * since `performance.timeOrigin`, monotonic). A step that did not run is
 * absent; one that failed still has its end.
 */
export interface AttemptTimeline {
  /** When the module took the request. */
  start: number;
  /** Claiming the key, waits on a concurrent owner included (`claimMs`). */
  claim?: StepTiming;
  /** The handler, up to its result or its error. */
  handler?: StepTiming;
  /** Recording the outcome and committing: phased, the fenced write of the outcome. */
  commit?: StepTiming;
}

/** When a step of an attempt ran, as `performance.now()` readings. */
export interface StepTiming {
  /** When the step began. */
  start: number;
  /** When the step ended. */
  end: number;
}

/** The COMMIT of a claim's transaction failed: the client gets an error, nothing was recorded. */
export interface CommitFailedEvent {
  kind: 'commit_failed';
  operation: string;
  keyHash: string;
  error: string;
}

/** A reaper pass that deleted records. */
export interface ReapedEvent {
  kind: 'reaped';
  deleted: number;
  batches: number;
  elapsedMs: number;
}

/** The completer took over a phased claim whose lease had lapsed. */
export interface LeaseExpiredEvent {
  kind: 'lease_expired';
  operation: string;
  keyHash: string;
  result: 'completed' | 'failed' | 'discarded' | 'released';
  reason?: string;
}

/** What one relay batch did. */
export interface RelayBatchResult {
  claimed: number;
  published: number;
  /** Failed publishes counted as attempts (the dead letters among them included). */
  failed: number;
  dead: number;
  /** Claimed but left for later: an older event of the same key was not in this batch. */
  blocked: number;
  /** The publisher reported the broker unreachable; the batch stopped without counting attempts. */
  unavailable: boolean;
}

/** A relay batch that claimed outbox events. */
export interface OutboxRelayedEvent extends RelayBatchResult {
  kind: 'outbox_relayed';
  elapsedMs: number;
}

/** An outbox event ran out of attempts: it is kept with status `dead` and no longer blocks its key. */
export interface OutboxDeadLetterEvent {
  kind: 'outbox_dead_letter';
  eventId: string;
  type: string;
  attempts: number;
  error: string;
}

/** The relay found the broker unreachable and paused delivery (once per outage). */
export interface OutboxUnavailableEvent {
  kind: 'outbox_unavailable';
}

/** A reaper pass that deleted settled (sent or dead) outbox events. */
export interface OutboxReapedEvent {
  kind: 'outbox_reaped';
  deleted: number;
  batches: number;
  elapsedMs: number;
}

/** What an operator did through `IdempotencyAdmin` (its API, page or CLI), or was refused: the audit trail of every action. */
export interface AdminActionEvent {
  kind: 'admin_action';
  action: 'release' | 'fail' | 'requeue';
  result: 'done' | 'refused';
  /** Who asked, as the admin module's `actor` (or the CLI's `--as`) names them. */
  actor: string;
  /** Why, as they gave it. */
  reason: string;
  /** `release` and `fail`: the record's operation and `keyHash`. */
  operation?: string;
  keyHash?: string;
  /** `requeue`: the events put back in line (or asked for, when refused). */
  eventIds?: string[];
  /** When refused: the problem's type, e.g. `urn:nest-idempotency:problem:admin-lease-live`. */
  refusal?: string;
  /** `release`: done only because the operator forced it, its run having had effects a retry does again. */
  forced?: true;
}

/** Every event the module emits, told apart by `kind`. */
export type IdempotencyEvent =
  | AdminActionEvent
  | AttemptEvent
  | CommitFailedEvent
  | ReapedEvent
  | LeaseExpiredEvent
  | OutboxRelayedEvent
  | OutboxDeadLetterEvent
  | OutboxUnavailableEvent
  | OutboxReapedEvent;

/** A listener of `IdempotencyEvents.subscribe()` and the `onEvent` option. */
export type IdempotencyEventListener = (event: IdempotencyEvent) => void;
