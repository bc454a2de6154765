import { HttpException } from '@nestjs/common';
import { asUnavailable } from '../driver/database-errors.js';
import {
  IdempotencyDatabaseUnavailableException,
  IdempotencyKeyMalformedException,
  IdempotencyKeyMissingException,
  IdempotencyKeyReusedException,
  IdempotencyRecordUndecryptableException,
  IdempotencyRequestInProgressException,
  IdempotencyRequestNotCanonicalException,
  IdempotencyTenantUnresolvedException,
} from '../errors/idempotency.exceptions.js';
import type { FlowEnding } from '../outcome/recorded-outcome.js';
import type { RecordId } from '../records/stored-record.js';
import type { AttemptEvent, AttemptOutcome } from './idempotency-event.types.js';
import { hashKey } from './idempotency-events.js';

/** How a kind of call reads its errors into an attempt event. */
export interface AttemptErrors {
  outcomeOf(error: unknown): AttemptOutcome;
  /** The status answered for an error; none where the call has no status. */
  statusOf?(error: unknown): number;
}

/** An HTTP request's or a GraphQL field's errors: the module's problems, or the handler's own. */
export const HTTP_ERRORS: AttemptErrors = {
  outcomeOf(error) {
    if (error instanceof IdempotencyKeyMissingException) return 'key_missing';
    if (error instanceof IdempotencyKeyMalformedException) return 'key_malformed';
    if (error instanceof IdempotencyKeyReusedException) return 'key_reused';
    if (error instanceof IdempotencyRequestInProgressException) return 'conflict';
    if (error instanceof IdempotencyRequestNotCanonicalException) return 'not_canonical';
    if (error instanceof IdempotencyTenantUnresolvedException) return 'tenant_unresolved';
    if (error instanceof IdempotencyDatabaseUnavailableException) return 'unavailable';
    if (error instanceof IdempotencyRecordUndecryptableException) return 'undecryptable';
    return 'rolled_back';
  },
  statusOf: (error) => (error instanceof HttpException ? error.getStatus() : 500),
};

/**
 * The one attempt event of a call (its operation, and its key where it had
 * one), from how its flow ended and the error it answers, if any. With
 * `start`, the event carries the steps' timeline.
 * Built by assignment rather than spreads: it is made for every request.
 */
export function attemptEvent({ operation, id }: { operation: string; id?: RecordId }, { steps, settled }: FlowEnding, error: unknown, errors: AttemptErrors, start?: number): AttemptEvent {
  const { timeline, ...facts } = steps;
  const event: AttemptEvent = { kind: 'attempt', operation, outcome: 'executed', ...facts };
  if (id) event.keyHash = hashKey(id);
  if (start !== undefined) event.timeline = { start, ...timeline };
  if (settled) {
    event.outcome = settled.replayed ? 'replayed' : 'executed';
    event.status = settled.outcome.status;
    return event;
  }
  event.outcome = errors.outcomeOf(error);
  const status = errors.statusOf?.(error);
  if (status !== undefined) event.status = status;
  if (error instanceof IdempotencyRecordUndecryptableException) event.undecryptable = error.reason;
  return event;
}

/** A lost database connection as the module's 503; any other error as it is. */
export function unavailableOr(error: unknown): unknown {
  try {
    return asUnavailable(error);
  } catch (answered) {
    return answered;
  }
}
