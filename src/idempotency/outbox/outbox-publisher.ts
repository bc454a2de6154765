/** One event as the relay hands it to a publisher. */
export interface OutboxMessage {
  /** The event's operation identity: publish it as the message id, consumers deduplicate on it. */
  id: string;
  type: string;
  payload: unknown;
  /** Headers given to `outbox.add()`. */
  headers: Readonly<Record<string, string>>;
  /** Events with the same ordering key are published one at a time, in commit order. */
  orderingKey: string | null;
  /** `keyHash` of the idempotency record that caused it, as in the module's events and logs. */
  sourceKeyHash: string | null;
  /** Failed attempts so far. */
  attempts: number;
  createdAt: Date;
}

/**
 * Delivers outbox events to a broker. `publish` resolves only once the
 * broker holds the message durably (a JetStream publish ack, a RabbitMQ
 * publisher confirm, a Kafka ack with `acks=all`): the relay marks the event
 * sent after that, so a crash in between publishes it again, under the same
 * message id.
 *
 * Throw `OutboxPublisherUnavailableError` when the broker cannot be reached:
 * the relay then pauses without counting an attempt against the events.
 * Any other error counts as a failed attempt of that event.
 *
 * @example
 * const publisher: OutboxPublisher = { publish: (message) => channel.publishAndWaitForConfirm(message.type, message.payload, { messageId: message.id }) };
 */
export interface OutboxPublisher {
  /** Resolves once the broker holds the message durably; throws `OutboxPublisherUnavailableError` when the broker cannot be reached. */
  publish(message: OutboxMessage): Promise<void>;
  /** Called once when the relay stops, after its last publish. */
  close?(): Promise<void>;
}

/** The broker cannot be reached right now: no attempt is counted, the relay pauses and tries again. */
export class OutboxPublisherUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'OutboxPublisherUnavailableError';
  }
}
