import { JetStreamApiCodes, JetStreamApiError, jetstreamManager, StorageType } from '@nats-io/jetstream';
import { nanos, type NatsConnection } from '@nats-io/transport-node';
import type { LoggerService } from '@nestjs/common';

/** JetStream keeps at most this many copies of a stream. */
const MAX_REPLICAS = 5;

/** The stream events are published to and consumed from; created on start when missing. */
export interface JetStreamStreamOptions {
  /** e.g. `EVENTS`. */
  name: string;
  /** e.g. `['events.>']`: must cover every subject published. */
  subjects: string[];
  /**
   * How long JetStream remembers message ids to drop a re-publish, in ms.
   * A relay that dies between publish and mark re-publishes well within it.
   * Default 2 minutes (JetStream's).
   */
  duplicateWindowMs?: number;
  /** Largest message the stream accepts, in bytes; larger ones are rejected (and become dead letters). Default: unlimited. */
  maxMessageSize?: number;
  /**
   * Copies of the stream, on as many servers of a cluster, 1 to 5: with 3,
   * it stays available, and loses no acked event, while one server is down.
   * More than the cluster's servers cannot be placed, and the set-up is
   * retried until they are there. Only used when creating the stream.
   * Default 1, JetStream's own, the only one a single server takes.
   */
  replicas?: number;
}

/** Throws on stream options no JetStream server takes: at startup, rather than on every connection attempt. */
export function checkStreamOptions(options: JetStreamStreamOptions): void {
  const { replicas } = options;
  if (replicas !== undefined && !(Number.isInteger(replicas) && replicas >= 1 && replicas <= MAX_REPLICAS)) {
    throw new Error(`stream ${options.name}: replicas must be a whole number from 1 to ${MAX_REPLICAS} (and at most the servers of the cluster); got ${replicas}`);
  }
}

/**
 * Creates the stream when it does not exist; an existing stream is left as
 * it is. With a logger, it says when it created one, and warns when an
 * existing one has other replicas than asked for (`nats stream edit
 * --replicas` changes them).
 */
export async function ensureStream(connection: NatsConnection, options: JetStreamStreamOptions, logger?: Pick<LoggerService, 'log' | 'warn'>): Promise<'created' | 'found'> {
  const manager = await jetstreamManager(connection);
  const replicas = options.replicas ?? 1;
  try {
    const existing = await manager.streams.info(options.name);
    if (options.replicas !== undefined && existing.config.num_replicas !== replicas) {
      logger?.warn(`stream ${options.name} has ${existing.config.num_replicas} replicas, not the ${replicas} asked for: an existing stream is left as it is`);
    }
    return 'found';
  } catch (error) {
    if (!(error instanceof JetStreamApiError) || error.code !== JetStreamApiCodes.StreamNotFound) throw error;
  }
  await manager.streams.add({
    name: options.name,
    subjects: options.subjects,
    storage: StorageType.File,
    num_replicas: replicas,
    duplicate_window: nanos(options.duplicateWindowMs ?? 120_000),
    ...(options.maxMessageSize ? { max_msg_size: options.maxMessageSize } : {}),
  });
  logger?.log(`created stream ${options.name} (${options.subjects.join(', ')}) with ${replicas} ${replicas === 1 ? 'replica' : 'replicas'}`);
  return 'created';
}
