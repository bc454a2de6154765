import { IdempotentMessageError } from '../errors/idempotency.exceptions.js';

/** The message carries no usable key (no operation id or message id header, or the `messageKey` option found none). */
export class MessageKeyMissingError extends IdempotentMessageError {
  constructor(operation: string, reason: string) {
    super(`${operation}: the message has no usable idempotency key (${reason}); it cannot be processed exactly once, so it is not redelivered`, false);
  }
}

/** A message with this key was processed with different data. */
export class MessageKeyReusedError extends IdempotentMessageError {
  constructor(operation: string, keyHash: string) {
    super(`${operation}: key#${keyHash} was already processed for a message with different data; this one is not redelivered`, false);
  }
}

/** Another delivery of the same message is still being processed: redeliver after a while. */
export class MessageInProgressError extends IdempotentMessageError {
  constructor(operation: string, keyHash: string, retryAfterMs: number) {
    super(`${operation}: key#${keyHash} is still being processed by another delivery`, true, retryAfterMs);
  }
}
