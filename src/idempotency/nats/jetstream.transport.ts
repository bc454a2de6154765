import { AckPolicy, type Consumer, type ConsumerMessages, DeliverPolicy, JetStreamApiCodes, JetStreamApiError, jetstream, jetstreamManager, type JsMsg } from '@nats-io/jetstream';
import { nanos, type NatsConnection, type NodeConnectionOptions } from '@nats-io/transport-node';
import { Logger } from '@nestjs/common';
import { type CustomTransportStrategy, Server } from '@nestjs/microservices';
import { lastValueFrom } from 'rxjs';
import { IdempotentMessageError } from '../errors/idempotency.exceptions.js';
import { JetStreamContext } from './jetstream.context.js';
import { checkStreamOptions, ensureStream, type JetStreamStreamOptions } from './jetstream-stream.js';
import { connectWithRetry, type RetriedConnection } from './nats-connection.js';

/** A pull left at a consumer leader that died is noticed after two missed heartbeats, half this each: 10 s, not the client's 30 s, resumes within about 10 s. */
const PULL_EXPIRES_MS = 10_000;

/** The options of `JetStreamTransport`. */
export interface JetStreamTransportOptions {
  /**
   * NATS servers: one URL, a list, or a comma-separated string, e.g.
   * `nats://10.0.0.1:4222,nats://10.0.0.2:4222,nats://10.0.0.3:4222` for a
   * cluster. The client connects to any that answers and fails over to the others.
   */
  servers: string | string[];
  /** Further NATS connection options. */
  connection?: Omit<NodeConnectionOptions, 'servers'>;
  /** The stream the handlers consume from; created on connecting when missing. */
  stream: JetStreamStreamOptions;
  /**
   * Names this application's durable consumers: one per `@EventPattern()`,
   * named `${durable}_${pattern}`, filtered on the pattern's subject
   * (wildcards allowed). Instances with the same name share the work.
   */
  durable: string;
  /**
   * Prepended to every pattern to name its subject: with `events`, the
   * handler of `order.created` consumes `events.order.created`, as the
   * publisher's `subjectPrefix` sends it. Default none: patterns are subjects.
   */
  subjectPrefix?: string;
  /** How long JetStream waits for an ack before redelivering, in ms. Default 30 s. */
  ackWaitMs?: number;
  /** Deliveries of one message before JetStream gives up on it. Default 100. */
  maxDeliver?: number;
  /** Messages each handler processes at once. Default 1: in stream order. */
  concurrency?: number;
  /** Delay before a failed message is redelivered: `baseMs * 2^(deliveries - 1)` up to `maxMs`. Default 500 ms to 30 s. */
  redeliveryBackoff?: { baseMs?: number; maxMs?: number };
}

/**
 * A NestJS transport for NATS JetStream event handlers (`@EventPattern()`),
 * built for `@Idempotent()` handlers: each pattern gets a durable pull
 * consumer with explicit acks, and a message is acknowledged only after its
 * handler returned, that is after the idempotent flow committed. A crash
 * before the ack redelivers it, and the handler's record turns the
 * redelivery into a replay. A failed handler's message is not acknowledged:
 * it is redelivered after a backoff. A message the idempotent flow refuses
 * for good (no key, a key reused with other data) is terminated.
 *
 * Started while no NATS server answers, it starts all the same and keeps
 * connecting in the background with backoff (a warning per failed attempt);
 * the consumers are created and consumed from once it is connected.
 *
 * @example
 * app.connectMicroservice({ strategy: new JetStreamTransport({ servers, stream: { name: 'EVENTS', subjects: ['events.>'] }, durable: 'fulfilment' }) });
 */
export class JetStreamTransport extends Server implements CustomTransportStrategy {
  /** Handler errors reach this transport, which decides between redelivery and termination. */
  override readonly propagatesEventHandlerErrors = true;
  protected override readonly logger = new Logger(JetStreamTransport.name);
  private readonly stopped = new AbortController();
  private connecting?: RetriedConnection;
  private connection?: NatsConnection;
  private readonly subscriptions: ConsumerMessages[] = [];
  private readonly loops: Array<Promise<void>> = [];

  constructor(private readonly options: JetStreamTransportOptions) {
    super();
    checkStreamOptions(options.stream);
  }

  /** Returns once connected and consuming, or once the first attempt failed (it goes on trying then). */
  async listen(callback: (error?: unknown) => void): Promise<void> {
    const patterns: string[] = [];
    for (const [pattern, handler] of this.messageHandlers) {
      if (handler.isEventHandler) patterns.push(pattern);
      else this.logger.warn(`${pattern}: JetStream carries events; @MessagePattern() handlers are not served by this transport`);
    }
    this.connecting = connectWithRetry({
      connection: { name: this.options.durable, ...this.options.connection, servers: this.options.servers },
      setUp: (connection) => this.setUp(connection, patterns),
      logger: this.logger,
      signal: this.stopped.signal,
    });
    await this.connecting.firstAttempt;
    callback();
  }

  /** Stops connecting or pulling, lets messages in flight finish (and be acked), then closes the connection. */
  async close(): Promise<void> {
    this.stopped.abort();
    const connection = await this.connecting?.ready;
    for (const subscription of this.subscriptions) void subscription.stop();
    await Promise.allSettled(this.loops);
    if (connection && !connection.isClosed()) await connection.drain().catch(() => connection.close());
  }

  on(): never {
    throw new Error('JetStreamTransport has no events to listen to');
  }

  unwrap<T>(): T {
    if (!this.connection) throw new Error('JetStreamTransport is not connected yet');
    return this.connection as T;
  }

  /** Creates the stream and each pattern's durable consumer when missing, then starts pulling; idempotent, so a failed attempt just runs again. */
  private async setUp(connection: NatsConnection, patterns: string[]): Promise<void> {
    await ensureStream(connection, this.options.stream, this.logger);
    const consumers: Array<{ pattern: string; name: string; consumer: Consumer }> = [];
    for (const pattern of patterns) consumers.push({ pattern, ...(await this.consumerOf(connection, pattern)) });
    // Only now, with every consumer there: a failed attempt leaves nothing pulling.
    for (const { pattern, name, consumer } of consumers) this.loops.push((await this.consume(pattern, name, consumer)).loop);
    this.connection = connection;
  }

  /** The pattern's durable consumer, created when missing. */
  private async consumerOf(connection: NatsConnection, pattern: string): Promise<{ name: string; consumer: Consumer }> {
    const name = `${this.options.durable}_${pattern.replace(/[^A-Za-z0-9_-]/g, '_')}`;
    const manager = await jetstreamManager(connection);
    try {
      await manager.consumers.info(this.options.stream.name, name);
    } catch (error) {
      if (!(error instanceof JetStreamApiError) || error.code !== JetStreamApiCodes.ConsumerNotFound) throw error;
      await manager.consumers.add(this.options.stream.name, {
        durable_name: name,
        filter_subject: this.options.subjectPrefix ? `${this.options.subjectPrefix}.${pattern}` : pattern,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        ack_wait: nanos(this.options.ackWaitMs ?? 30_000),
        max_deliver: this.options.maxDeliver ?? 100,
      });
    }
    return { name, consumer: await jetstream(connection).consumers.get(this.options.stream.name, name) };
  }

  /** Starts pulling from the consumer into the handler; `loop` ends once stopped and drained. */
  private async consume(pattern: string, name: string, consumer: Consumer): Promise<{ loop: Promise<void> }> {
    const concurrency = Math.max(1, this.options.concurrency ?? 1);
    const messages = await consumer.consume({ max_messages: Math.max(10, concurrency * 2), expires: PULL_EXPIRES_MS });
    this.subscriptions.push(messages);
    this.logger.log(`consuming ${pattern} from ${this.options.stream.name} as ${name}`);
    const loop = (async () => {
      const inFlight = new Set<Promise<void>>();
      for await (const message of messages) {
        const task = this.process(pattern, message).finally(() => inFlight.delete(task));
        inFlight.add(task);
        if (inFlight.size >= concurrency) await Promise.race(inFlight);
      }
      await Promise.allSettled(inFlight);
    })();
    return { loop };
  }

  /** Runs the handler; acks after it returned, naks (redelivery later) or terms after it failed. */
  private async process(pattern: string, message: JsMsg): Promise<void> {
    const handler = this.getHandlerByPattern(pattern)!;
    try {
      const result = await handler(decode(message), new JetStreamContext([message]));
      await lastValueFrom(this.transformToObservable(result), { defaultValue: undefined });
      message.ack();
    } catch (error) {
      if (error instanceof IdempotentMessageError && !error.redeliver) {
        this.logger.error(`${message.subject} #${message.seq}: ${error.message}`);
        message.term(); // without a reason: servers before 2.10 do not know '+TERM reason'
        return;
      }
      const delay = error instanceof IdempotentMessageError && error.retryAfterMs !== undefined ? error.retryAfterMs : this.redeliveryDelay(message.info.deliveryCount);
      if (!(error instanceof IdempotentMessageError)) this.logger.warn(`${message.subject} #${message.seq} failed (delivery ${message.info.deliveryCount}), redelivery in ${delay} ms: ${describe(error)}`);
      message.nak(delay);
    }
  }

  private redeliveryDelay(deliveries: number): number {
    const baseMs = this.options.redeliveryBackoff?.baseMs ?? 500;
    const maxMs = this.options.redeliveryBackoff?.maxMs ?? 30_000;
    return Math.min(maxMs, baseMs * 2 ** Math.max(0, deliveries - 1));
  }
}

/** JSON payloads as values; anything else as text. */
function decode(message: JsMsg): unknown {
  const text = message.string();
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function describe(error: unknown): string {
  if (error instanceof Error) return error.message;
  return typeof error === 'object' ? JSON.stringify(error) : String(error);
}
