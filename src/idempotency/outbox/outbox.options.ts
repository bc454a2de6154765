import type { OutboxPublisher } from './outbox-publisher.js';

/** Options of `IdempotencyOutboxModule.forRoot()` / `forRootAsync()`. */
export interface OutboxModuleOptions {
  /**
   * Where the relay delivers events. Without one, events are still written
   * (they commit with their change) but the relay does not run: another
   * process, with a publisher, delivers them.
   */
  publisher?: OutboxPublisher;
  /** The relay's settings; `false` keeps it off even with a publisher. */
  relay?: OutboxRelayOptions | false;
  /**
   * Whether inserts notify the relay (LISTEN/NOTIFY) so that it wakes at
   * once. PostgreSQL serialises the commits of notifying transactions, so at
   * a high commit rate turn it off and let the relay poll. Default true.
   */
  notify?: boolean;
  /** How long, in ms, sent and dead events are kept before the reaper deletes them. Default: the idempotency module's retention. */
  retention?: number;
}

/** How the relay claims, publishes and retries. */
export interface OutboxRelayOptions {
  /** Events claimed per batch. Default 100. */
  batchSize?: number;
  /** How often the relay looks for events when nothing woke it, in ms. Default 1000. */
  pollIntervalMs?: number;
  /** Attempts before an event becomes a dead letter. Default 10. */
  maxAttempts?: number;
  /** Backoff between attempts of one event: `baseMs * 2^attempts` up to `maxMs`, jittered. Default 500 ms to 60 s. */
  backoff?: { baseMs?: number; maxMs?: number };
  /** Pause after the publisher reported the broker unavailable, in ms. Default 1000. */
  unavailablePauseMs?: number;
}

export interface ResolvedOutboxOptions {
  publisher?: OutboxPublisher;
  notify: boolean;
  retention?: number;
  relay: Required<Omit<OutboxRelayOptions, 'backoff'>> & { enabled: boolean; backoff: { baseMs: number; maxMs: number } };
}

/** The one place outbox defaults live. */
export function resolveOutboxOptions(options: OutboxModuleOptions): ResolvedOutboxOptions {
  const relay = options.relay || {};
  return {
    publisher: options.publisher,
    notify: options.notify ?? true,
    retention: options.retention,
    relay: {
      enabled: options.relay !== false && options.publisher !== undefined,
      batchSize: relay.batchSize ?? 100,
      pollIntervalMs: relay.pollIntervalMs ?? 1000,
      maxAttempts: relay.maxAttempts ?? 10,
      unavailablePauseMs: relay.unavailablePauseMs ?? 1000,
      backoff: { baseMs: relay.backoff?.baseMs ?? 500, maxMs: relay.backoff?.maxMs ?? 60_000 },
    },
  };
}
