import { Inject, Injectable } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { RecordUndecryptableReason } from '../idempotency.exceptions.js';
import type { ResolvedModuleOptions } from '../idempotency.options.js';
import type { RecordId } from '../idempotency.store.js';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.tokens.js';
import { publishOnChannel } from './idempotency-channels.js';

/** How one request to an idempotent route ended. */
export type AttemptOutcome =
  | 'executed' // the handler ran and its outcome was recorded: one logical operation
  | 'replayed'
  | 'conflict' // 409: still in flight after the wait
  | 'key_reused' // 422: fingerprint mismatch
  | 'key_missing'
  | 'key_malformed'
  | 'not_canonical'
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

export interface StepTiming {
  start: number;
  end: number;
}

/** Records that `step` of the attempt ran from `start` (a `performance.now()` reading) until now. */
export function timeStep(attempt: AttemptEvent, step: 'claim' | 'handler' | 'commit', start: number): void {
  if (attempt.timeline) attempt.timeline[step] = { start, end: performance.now() };
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

/** A relay batch that claimed outbox events. */
export interface OutboxRelayedEvent {
  kind: 'outbox_relayed';
  claimed: number;
  published: number;
  /** Failed publishes counted as attempts (the dead letters among them included). */
  failed: number;
  dead: number;
  /** Left for later behind an older event of their key. */
  blocked: number;
  /** The broker was unreachable: the batch stopped, no attempt counted. */
  unavailable: boolean;
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

export type IdempotencyEvent =
  | AttemptEvent
  | CommitFailedEvent
  | ReapedEvent
  | LeaseExpiredEvent
  | OutboxRelayedEvent
  | OutboxDeadLetterEvent
  | OutboxUnavailableEvent
  | OutboxReapedEvent;

export type IdempotencyEventListener = (event: IdempotencyEvent) => void;

/**
 * The outcomes of the module as events: metrics and logs are built on them,
 * and users without Prometheus subscribe here (or pass `onEvent`). Every
 * event is also published on its `node:diagnostics_channel` channel
 * (`IDEMPOTENCY_CHANNELS`), for tracers and APM agents outside Nest's DI.
 */
@Injectable()
export class IdempotencyEvents {
  private readonly listeners = new Set<IdempotencyEventListener>();

  constructor(@Inject(RESOLVED_IDEMPOTENCY_OPTIONS) options: ResolvedModuleOptions) {
    if (options.onEvent) this.listeners.add(options.onEvent);
  }

  /** Returns the function that unsubscribes. */
  subscribe(listener: IdempotencyEventListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  emit(event: IdempotencyEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch {
        // A listener's failure must never fail the request it observes.
      }
    }
    publishOnChannel(event);
  }
}

/** Identifies a key in events and logs without revealing it. */
export function hashKey(id: RecordId): string {
  return createHash('sha256').update(`${id.scope}\n${id.operation}\n${id.key}`).digest('hex').slice(0, 16);
}
