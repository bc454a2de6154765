import { Logger } from '@nestjs/common';
import { JetStreamApiError, jetstream, type JetStreamClient } from '@nats-io/jetstream';
import { connect, headers as natsHeaders, InvalidArgumentError, type NatsConnection, type NodeConnectionOptions } from '@nats-io/transport-node';
import { OPERATION_ID_HEADER } from '../messaging/idempotent-message.js';
import { type OutboxMessage, type OutboxPublisher, OutboxPublisherUnavailableError } from '../outbox/outbox-publisher.js';
import { ensureStream, type JetStreamStreamOptions } from './jetstream-stream.js';

/** The header with the event's type. */
export const EVENT_TYPE_HEADER = 'Event-Type';
/** The header with the `keyHash` of the idempotency record that caused the event. */
export const SOURCE_KEY_HASH_HEADER = 'Source-Key-Hash';

export interface JetStreamPublisherOptions {
  /** The stream; created on start when missing. */
  stream: JetStreamStreamOptions;
  /** The subject of an event. Default `${subjectPrefix}.${type}`, or the type alone without a prefix. */
  subject?: (message: OutboxMessage) => string;
  /** e.g. `events`, so that `order.created` goes to `events.order.created`. */
  subjectPrefix?: string;
  /** How long a publish waits for JetStream's ack before the broker counts as unreachable, in ms. Default 5000. */
  ackTimeoutMs?: number;
}

/**
 * Publishes outbox events to NATS JetStream: the event id as `Nats-Msg-Id`
 * (and `Operation-Id`), the payload as JSON, and resolves on the stream's
 * ack. A re-publish after a relay crash is dropped by the stream within its
 * duplicate window (the ack says `duplicate`), and consumers deduplicate on
 * the id beyond it.
 *
 * JetStream's own refusals (a message over the stream's size limit, say)
 * count as failed attempts; a lost connection, a timeout or no stream
 * answering count as the broker being unreachable.
 */
export class JetStreamPublisher implements OutboxPublisher {
  private readonly logger = new Logger('JetStreamPublisher');
  private readonly client: JetStreamClient;

  private constructor(
    /** The NATS connection, for sharing with other clients. */
    readonly connection: NatsConnection,
    private readonly options: JetStreamPublisherOptions,
    private readonly ownsConnection: boolean,
  ) {
    this.client = jetstream(connection);
  }

  /** Connects to NATS (it reconnects by itself afterwards) and creates the stream when missing. */
  static async connect(options: JetStreamPublisherOptions & { servers: string | string[]; connection?: Omit<NodeConnectionOptions, 'servers'> }): Promise<JetStreamPublisher> {
    const connection = await connect({ name: 'outbox-relay', maxReconnectAttempts: -1, reconnectTimeWait: 500, ...options.connection, servers: options.servers });
    try {
      return await JetStreamPublisher.create(connection, options, true);
    } catch (error) {
      await connection.close();
      throw error;
    }
  }

  /** On a connection you manage (closing the publisher leaves it open). */
  static async create(connection: NatsConnection, options: JetStreamPublisherOptions, ownsConnection = false): Promise<JetStreamPublisher> {
    const publisher = new JetStreamPublisher(connection, options, ownsConnection);
    if ((await ensureStream(connection, options.stream)) === 'created') publisher.logger.log(`created stream ${options.stream.name} (${options.stream.subjects.join(', ')})`);
    return publisher;
  }

  async publish(message: OutboxMessage): Promise<void> {
    const headers = natsHeaders();
    for (const [name, value] of Object.entries(message.headers)) headers.set(name, value);
    headers.set(OPERATION_ID_HEADER, message.id);
    headers.set(EVENT_TYPE_HEADER, message.type);
    if (message.sourceKeyHash) headers.set(SOURCE_KEY_HASH_HEADER, message.sourceKeyHash);
    try {
      await this.client.publish(this.subjectOf(message), JSON.stringify(message.payload), { msgID: message.id, headers, timeout: this.options.ackTimeoutMs ?? 5000 });
    } catch (error) {
      if (error instanceof JetStreamApiError || error instanceof InvalidArgumentError) throw error;
      throw new OutboxPublisherUnavailableError(`NATS JetStream did not acknowledge: ${(error as Error).message}`, { cause: error });
    }
  }

  async close(): Promise<void> {
    if (this.ownsConnection && !this.connection.isClosed()) await this.connection.drain().catch(() => this.connection.close());
  }

  private subjectOf(message: OutboxMessage): string {
    if (this.options.subject) return this.options.subject(message);
    return this.options.subjectPrefix ? `${this.options.subjectPrefix}.${message.type}` : message.type;
  }
}
