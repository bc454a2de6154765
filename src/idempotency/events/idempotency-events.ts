import { Inject, Injectable, Logger } from '@nestjs/common';
import { hash } from 'node:crypto';
import diagnosticsChannel, { type Channel } from 'node:diagnostics_channel';
import type { ResolvedModuleOptions } from '../options/idempotency.options.js';
import type { RecordId } from '../records/stored-record.js';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../options/idempotency.tokens.js';
import type { IdempotencyEvent, IdempotencyEventListener } from './idempotency-event.types.js';

export type * from './idempotency-event.types.js';

/**
 * The `node:diagnostics_channel` channels the module publishes its events on,
 * one per event kind. The message is the event itself (`IdempotencyEvent`),
 * published synchronously in the async context of what caused it: an
 * `attempt` in the request's, so a subscriber sees the request's active span.
 *
 * @example
 * import { subscribe } from 'node:diagnostics_channel';
 * subscribe(IDEMPOTENCY_CHANNELS.attempt, (event) => console.log((event as AttemptEvent).outcome));
 */
export const IDEMPOTENCY_CHANNELS = {
  attempt: 'nest-idempotency:attempt',
  commit_failed: 'nest-idempotency:commit_failed',
  reaped: 'nest-idempotency:reaped',
  lease_expired: 'nest-idempotency:lease_expired',
  outbox_relayed: 'nest-idempotency:outbox_relayed',
  outbox_dead_letter: 'nest-idempotency:outbox_dead_letter',
  outbox_unavailable: 'nest-idempotency:outbox_unavailable',
  outbox_reaped: 'nest-idempotency:outbox_reaped',
  admin_action: 'nest-idempotency:admin_action',
} as const satisfies Record<IdempotencyEvent['kind'], string>;

// Held here so they stay alive: Node keeps channels by weak reference.
const channels = new Map<string, Channel>(Object.entries(IDEMPOTENCY_CHANNELS).map(([kind, name]) => [kind, diagnosticsChannel.channel(name)]));

/** Publishes `event` on its channel; costs one property read while nobody subscribes. */
export function publishOnChannel(event: IdempotencyEvent): void {
  const channel = channels.get(event.kind);
  if (channel?.hasSubscribers) channel.publish(event);
}

/**
 * The outcomes of the module as events: metrics and logs are built on them,
 * and users without Prometheus subscribe here (or pass `onEvent`). Every
 * event is also published on its `node:diagnostics_channel` channel
 * (`IDEMPOTENCY_CHANNELS`), for tracers and APM agents outside Nest's DI.
 */
@Injectable()
export class IdempotencyEvents {
  private readonly listeners = new Set<IdempotencyEventListener>();

  constructor(@Inject(RESOLVED_IDEMPOTENCY_OPTIONS) options: ResolvedModuleOptions) {
    if (options.onEvent) this.listeners.add(options.onEvent);
  }

  /** Returns the function that unsubscribes. */
  subscribe(listener: IdempotencyEventListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Calls every listener with the event, then publishes it on its diagnostics channel when that has subscribers. */
  emit(event: IdempotencyEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch {
        // A listener's failure must never fail the request it observes.
      }
    }
    publishOnChannel(event);
  }
}

/**
 * One log line per notable outcome (conflict, mismatch, undecryptable record, takeover, commit
 * failure, reaper pass, lease expiry), keys hashed. The happy path (first executions and
 * replays) stays quiet. An operator's action is logged by the admin (`adminActionLine`).
 */
@Injectable()
export class IdempotencyEventLog {
  private readonly logger = new Logger('Idempotency');

  constructor(events: IdempotencyEvents) {
    events.subscribe((event) => this.write(event));
  }

  private write(event: IdempotencyEvent): void {
    switch (event.kind) {
      case 'attempt':
        if (event.outcome === 'conflict') this.logger.log(`conflict: ${event.operation} key#${event.keyHash} still in flight after ${event.claimMs ?? 0} ms, answered 409`);
        if (event.outcome === 'key_reused') this.logger.warn(`key reused with a different request: ${event.operation} key#${event.keyHash}, answered 422`);
        if (event.outcome === 'undecryptable') this.logger.error(`recorded outcome not replayed, it does not decrypt (${event.undecryptable}): ${event.operation} key#${event.keyHash}, answered 500`);
        if (event.tookOver) this.logger.log(`takeover of ${event.tookOver === 'expired' ? 'an expired record' : 'a lapsed lease'}: ${event.operation} key#${event.keyHash}`);
        return;
      case 'commit_failed':
        return this.logger.error(`commit failed: ${event.operation} key#${event.keyHash}: ${event.error}`);
      case 'reaped':
        return this.logger.log(`reaper: deleted ${event.deleted} expired records in ${event.batches} batches, ${event.elapsedMs} ms`);
      case 'lease_expired': {
        const line = `lease expired: ${event.operation} key#${event.keyHash} ${event.result}${event.reason ? `: ${event.reason}` : ''}`;
        return event.result === 'failed' ? this.logger.warn(line) : this.logger.log(line);
      }
      case 'outbox_dead_letter':
        return this.logger.warn(`outbox: event ${event.eventId} (${event.type}) is a dead letter after ${event.attempts} attempts: ${event.error}`);
      case 'outbox_reaped':
        return this.logger.log(`reaper: deleted ${event.deleted} settled outbox events in ${event.batches} batches, ${event.elapsedMs} ms`);
    }
  }
}

/** Hashes already taken, by id: a request's attempt event and its outbox events name the same id object. */
const keyHashes = new WeakMap<RecordId, string>();

/** Identifies a key in events and logs without revealing it. */
export function hashKey(id: RecordId): string {
  let keyHash = keyHashes.get(id);
  if (keyHash === undefined) {
    keyHash = hash('sha256', `${id.scope}\n${id.operation}\n${id.key}`).slice(0, 16);
    keyHashes.set(id, keyHash);
  }
  return keyHash;
}
