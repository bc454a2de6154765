/**
 * The NATS JetStream entry point (`nest-idempotency/nats`): importing it
 * loads `@nats-io/transport-node`, `@nats-io/jetstream` and
 * `@nestjs/microservices`, which the core module never does.
 *
 * @module nest-idempotency/nats
 */
export { JetStreamPublisher, type JetStreamPublisherOptions, EVENT_TYPE_HEADER, SOURCE_KEY_HASH_HEADER } from './jetstream.publisher.js';
export { JetStreamTransport, type JetStreamTransportOptions } from './jetstream.transport.js';
export { JetStreamContext } from './jetstream.context.js';
export { ensureStream, type JetStreamStreamOptions } from './jetstream-stream.js';
