import { JetStreamApiCodes, JetStreamApiError, jetstreamManager, StorageType } from '@nats-io/jetstream';
import { nanos, type NatsConnection } from '@nats-io/transport-node';

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
}

/** Creates the stream when it does not exist; an existing stream is left as it is. */
export async function ensureStream(connection: NatsConnection, options: JetStreamStreamOptions): Promise<'created' | 'found'> {
  const manager = await jetstreamManager(connection);
  try {
    await manager.streams.info(options.name);
    return 'found';
  } catch (error) {
    if (!(error instanceof JetStreamApiError) || error.code !== JetStreamApiCodes.StreamNotFound) throw error;
  }
  await manager.streams.add({
    name: options.name,
    subjects: options.subjects,
    storage: StorageType.File,
    duplicate_window: nanos(options.duplicateWindowMs ?? 120_000),
    ...(options.maxMessageSize ? { max_msg_size: options.maxMessageSize } : {}),
  });
  return 'created';
}
