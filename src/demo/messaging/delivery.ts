import type { OutboxModuleOptions } from '../../idempotency/outbox/index.js';

/** How the demo delivers its outbox events and consumes them, from the environment. */
export interface DeliveryOptions {
  /** NATS servers with JetStream, one or a cluster's; without them events stay in the outbox and nothing consumes them. */
  natsServers?: string[];
  /** The stream, created on connecting when missing. */
  stream: string;
  /** Copies of the stream it is created with, one per server of a cluster (default the library's, 1). */
  streamReplicas?: number;
  /** Subjects are `${subjectPrefix}.${event type}`, e.g. `demo.order.created`. */
  subjectPrefix: string;
  /** Durable consumer name prefix of the fulfilment consumer. */
  durable: string;
  /** This process runs the relay. */
  relay: boolean;
  /** This process runs the fulfilment consumer. */
  consumer: boolean;
  /** Messages the consumer handles at once. */
  concurrency: number;
  /** How long JetStream waits for the consumer's ack before redelivering, in ms. */
  ackWaitMs: number;
  /** Relay attempts before an event becomes a dead letter, and the first backoff in ms (defaults: the library's). */
  maxAttempts?: number;
  backoffMs?: number;
  /** Probability that the relay process SIGKILLs itself after a broker ack, before marking the event sent (a chaos fault). */
  crashAfterPublish: number;
  /** Probability that the consumer process SIGKILLs itself after its commit, before the ack (a chaos fault). */
  crashAfterCommit: number;
}

const on = (value: string | undefined, fallback: boolean) => (value === undefined || value === '' ? fallback : !/^(0|off|false|no)$/i.test(value));

/** NATS_URL: one URL, or a cluster's as a comma-separated list. */
function natsServersOf(natsUrl: string | undefined): string[] | undefined {
  const servers = (natsUrl ?? '').split(',').map((server) => server.trim()).filter(Boolean);
  return servers.length > 0 ? servers : undefined;
}

/** The demo's delivery settings from the environment (NATS_URL, NATS_STREAM, OUTBOX_RELAY, ...), with its defaults. */
export function deliveryFromEnv(env: NodeJS.ProcessEnv = process.env): DeliveryOptions {
  return {
    natsServers: natsServersOf(env.NATS_URL),
    stream: env.NATS_STREAM ?? 'DEMO_EVENTS',
    streamReplicas: env.NATS_STREAM_REPLICAS ? Number(env.NATS_STREAM_REPLICAS) : undefined,
    subjectPrefix: env.NATS_SUBJECT_PREFIX ?? 'demo',
    durable: env.NATS_DURABLE ?? 'fulfilment',
    relay: on(env.OUTBOX_RELAY, true),
    consumer: on(env.FULFILMENT_CONSUMER, true),
    concurrency: Number(env.FULFILMENT_CONCURRENCY ?? 16),
    ackWaitMs: Number(env.FULFILMENT_ACK_WAIT_MS ?? 10_000),
    maxAttempts: env.OUTBOX_MAX_ATTEMPTS ? Number(env.OUTBOX_MAX_ATTEMPTS) : undefined,
    backoffMs: env.OUTBOX_BACKOFF_MS ? Number(env.OUTBOX_BACKOFF_MS) : undefined,
    crashAfterPublish: Number(env.FAULT_CRASH_AFTER_PUBLISH ?? 0),
    crashAfterCommit: Number(env.FAULT_CRASH_AFTER_COMMIT ?? 0),
  };
}

/** The stream and subjects of the demo's events. */
export function streamOf(delivery: DeliveryOptions) {
  return { name: delivery.stream, subjects: [`${delivery.subjectPrefix}.>`], replicas: delivery.streamReplicas };
}

/** The outbox module's options: a JetStream publisher where this process relays, none otherwise. */
export async function outboxOptions(delivery: DeliveryOptions): Promise<OutboxModuleOptions> {
  if (!delivery.natsServers || !delivery.relay) return {};
  // Loaded only with NATS: the demo without it never loads the NATS client.
  const { JetStreamPublisher } = await import('../../idempotency/nats/index.js');
  const { crashingPublisher } = await import('./crash-faults.js');
  const publisher = await JetStreamPublisher.connect({ servers: delivery.natsServers, stream: streamOf(delivery), subjectPrefix: delivery.subjectPrefix });
  return {
    publisher: crashingPublisher(publisher, delivery.crashAfterPublish),
    relay: { pollIntervalMs: 1000, maxAttempts: delivery.maxAttempts, backoff: { baseMs: delivery.backoffMs } },
  };
}

/** The transport serving the fulfilment consumer. */
export async function fulfilmentTransport(delivery: DeliveryOptions) {
  const { JetStreamTransport } = await import('../../idempotency/nats/index.js');
  return new JetStreamTransport({
    servers: delivery.natsServers!,
    stream: streamOf(delivery),
    subjectPrefix: delivery.subjectPrefix,
    durable: delivery.durable,
    concurrency: delivery.concurrency,
    ackWaitMs: delivery.ackWaitMs,
  });
}

export const DELIVERY_OFF_MESSAGE =
  'Event delivery is off: order.created events are written to idempotency_outbox and stay there. ' +
  'Set NATS_URL (e.g. NATS_URL=nats://127.0.0.1:4222, a NATS server with JetStream, or a comma-separated list of a cluster\'s) to run the outbox relay and the fulfilment consumer.';
