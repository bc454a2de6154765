/**
 * Idempotent message handlers (`nest-idempotency/messaging`):
 * `IdempotencyMessagingModule` serves `@Idempotent()` on `@EventPattern()`
 * and `@MessagePattern()` handlers, on any Nest transport; the errors it
 * hands the transport; the headers a message's key is read from. An app
 * that imports only the core entry point loads none of it.
 *
 * @module nest-idempotency/messaging
 */
export { IdempotencyMessagingModule } from './idempotency-messaging.module.js';
export { OPERATION_ID_HEADER, NATS_MESSAGE_ID_HEADER } from './idempotent-message.js';
export { MessageInProgressError, MessageKeyMissingError, MessageKeyReusedError } from './message.errors.js';
