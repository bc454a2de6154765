import { HttpException } from '@nestjs/common';
import { asUnavailable } from '../database-errors.js';
import {
  IdempotencyDatabaseUnavailableException,
  IdempotencyKeyMalformedException,
  IdempotencyKeyMissingException,
  IdempotencyKeyReusedException,
  IdempotencyRecordUndecryptableException,
  IdempotencyRequestInProgressException,
  IdempotencyRequestNotCanonicalException,
} from '../idempotency.exceptions.js';
import type { FlowEnding } from '../recorded-outcome.js';
import type { AttemptEvent, AttemptOutcome } from './idempotency-event.types.js';

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
    if (error instanceof IdempotencyDatabaseUnavailableException) return 'unavailable';
    if (error instanceof IdempotencyRecordUndecryptableException) return 'undecryptable';
    return 'rolled_back';
  },
  statusOf: (error) => (error instanceof HttpException ? error.getStatus() : 500),
};

/**
 * The one attempt event of a call, from how its flow ended and the error it
 * answers, if any. With `start`, the event carries the steps' timeline.
 */
export function attemptEvent(operation: string, keyHash: string | undefined, { steps, settled }: FlowEnding, error: unknown, errors: AttemptErrors, start?: number): AttemptEvent {
  const { timeline, ...facts } = steps;
  const attempt: AttemptEvent = { kind: 'attempt', operation, outcome: 'executed', ...(keyHash && { keyHash }), ...facts, ...(start !== undefined && { timeline: { start, ...timeline } }) };
  if (settled) return { ...attempt, outcome: settled.replayed ? 'replayed' : 'executed', status: settled.outcome.status };
  const status = errors.statusOf?.(error);
  return {
    ...attempt,
    outcome: errors.outcomeOf(error),
    ...(status !== undefined && { status }),
    ...(error instanceof IdempotencyRecordUndecryptableException && { undecryptable: error.reason }),
  };
}

/** A lost database connection as the module's 503; any other error as it is. */
export function unavailableOr(error: unknown): unknown {
  try {
    return asUnavailable(error);
  } catch (answered) {
    return answered;
  }
}
