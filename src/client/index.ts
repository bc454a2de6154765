/**
 * A retrying client for idempotent HTTP APIs: one key per operation, reused on every attempt.
 *
 * @module nest-idempotency/client
 */
export {
  IdempotentClient,
  type AttemptOutcome,
  type ClientResponse,
  type IdempotentClientOptions,
  type IdempotentRequest,
  type SendResult,
  type StopReason,
} from './idempotent-client.js';
export { backoffDelay, retryAfterMs, type BackoffOptions } from './backoff.js';
