import diagnosticsChannel, { type Channel } from 'node:diagnostics_channel';
import type { IdempotencyEvent } from './idempotency-event.types.js';

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
