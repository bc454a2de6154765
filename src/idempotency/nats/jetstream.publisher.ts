import { Logger } from '@nestjs/common';
import { JetStreamApiError, jetstream, type JetStreamClient } from '@nats-io/jetstream';
import { headers as natsHeaders, InvalidArgumentError, type NatsConnection, type NodeConnectionOptions } from '@nats-io/transport-node';
import { OPERATION_ID_HEADER } from '../messaging/idempotent-message.js';
import { type OutboxMessage, type OutboxPublisher, OutboxPublisherUnavailableError } from '../outbox/outbox-publisher.js';
import { checkStreamOptions, ensureStream, type JetStreamStreamOptions } from './jetstream-stream.js';
import { connectWithRetry, type RetriedConnection } from './nats-connection.js';

/** The header with the event's type. */
export const EVENT_TYPE_HEADER = 'Event-Type';
/** The header with the `keyHash` of the idempotency record that caused the event. */
export const SOURCE_KEY_HASH_HEADER = 'Source-Key-Hash';

/** The options of `JetStreamPublisher.connect()` and `JetStreamPublisher.create()`. */
export interface JetStreamPublisherOptions {
  /** The stream; created on connecting when missing. */
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
 * count as failed attempts; a lost connection, a timeout, no stream
 * answering, or no connection made yet count as the broker being
 * unreachable, so the relay pauses without counting attempts.
 */
export class JetStreamPublisher implements OutboxPublisher {
  private readonly logger = new Logger('JetStreamPublisher');
  private readonly stopped = new AbortController();
  private connecting?: RetriedConnection;
  private established?: { connection: NatsConnection; client: JetStreamClient };

  private constructor(
    private readonly options: JetStreamPublisherOptions,
    private readonly ownsConnection: boolean,
  ) {
    checkStreamOptions(options.stream);
  }

  /**
   * Connects to NATS and creates the stream when missing. When no server
   * answers, it resolves all the same and keeps trying in the background
   * with backoff (a warning per failed attempt), so an app started before
   * its broker starts; its events wait in the outbox meanwhile. Once
   * connected, the NATS client reconnects by itself.
   *
   * `servers` is one URL, a list, or a comma-separated string: list a
   * cluster's servers, and the client connects to any that answers and
   * fails over to the others.
   */
  static async connect(options: JetStreamPublisherOptions & { servers: string | string[]; connection?: Omit<NodeConnectionOptions, 'servers'> }): Promise<JetStreamPublisher> {
    const publisher = new JetStreamPublisher(options, true);
    publisher.connecting = connectWithRetry({
      connection: { name: 'outbox-relay', ...options.connection, servers: options.servers },
      setUp: (connection) => publisher.setUp(connection),
      logger: publisher.logger,
      signal: publisher.stopped.signal,
    });
    await publisher.connecting.firstAttempt;
    return publisher;
  }

  /** On a connection you manage (closing the publisher leaves it open). */
  static async create(connection: NatsConnection, options: JetStreamPublisherOptions, ownsConnection = false): Promise<JetStreamPublisher> {
    const publisher = new JetStreamPublisher(options, ownsConnection);
    await publisher.setUp(connection);
    return publisher;
  }

  /** The NATS connection once established, for sharing with other clients. */
  get connection(): NatsConnection | undefined {
    return this.established?.connection;
  }

  /** Publishes to `${subjectPrefix}.${type}` with the event's id as `Nats-Msg-Id`, and resolves on the stream's ack. */
  async publish(message: OutboxMessage): Promise<void> {
    if (!this.established) throw new OutboxPublisherUnavailableError('not connected to NATS yet');
    const headers = natsHeaders();
    for (const [name, value] of Object.entries(message.headers)) headers.set(name, value);
    headers.set(OPERATION_ID_HEADER, message.id);
    headers.set(EVENT_TYPE_HEADER, message.type);
    if (message.sourceKeyHash) headers.set(SOURCE_KEY_HASH_HEADER, message.sourceKeyHash);
    try {
      await this.established.client.publish(this.subjectOf(message), JSON.stringify(message.payload), { msgID: message.id, headers, timeout: this.options.ackTimeoutMs ?? 5000 });
    } catch (error) {
      if (error instanceof JetStreamApiError || error instanceof InvalidArgumentError) throw error;
      throw new OutboxPublisherUnavailableError(`NATS JetStream did not acknowledge: ${(error as Error).message}`, { cause: error });
    }
  }

  async close(): Promise<void> {
    this.stopped.abort();
    await this.connecting?.ready;
    const connection = this.established?.connection;
    if (this.ownsConnection && connection && !connection.isClosed()) await connection.drain().catch(() => connection.close());
  }

  /** Creates the stream when missing; publishes go out from then on. */
  private async setUp(connection: NatsConnection): Promise<void> {
    await ensureStream(connection, this.options.stream, this.logger);
    this.established = { connection, client: jetstream(connection) };
  }

  private subjectOf(message: OutboxMessage): string {
    if (this.options.subject) return this.options.subject(message);
    return this.options.subjectPrefix ? `${this.options.subjectPrefix}.${message.type}` : message.type;
  }
}
