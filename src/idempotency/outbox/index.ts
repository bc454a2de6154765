/**
 * The transactional outbox (`nest-idempotency/outbox`): `IdempotencyOutboxModule`,
 * `Outbox.add()` in the request's transaction, the relay that publishes what
 * committed, and its cleanup in the reaper's pass. An app that imports only
 * the core entry point loads none of it.
 *
 * @module nest-idempotency/outbox
 */
export { IdempotencyOutboxModule } from './outbox.module.js';
export { Outbox, OutboxOutsideTransactionError, type NewOutboxEvent } from './outbox.js';
export { OutboxEventUnstorableError } from './storable-event.js';
export { OutboxRelay, type OutboxStats } from './outbox.relay.js';
export { OutboxReaping } from './outbox.reaping.js';
export { type OutboxMessage, type OutboxPublisher, OutboxPublisherUnavailableError } from './outbox-publisher.js';
export type { OutboxModuleOptions, OutboxRelayOptions } from './outbox.options.js';
