import { Inject, Injectable } from '@nestjs/common';
import { hash } from 'node:crypto';
import type { ResolvedModuleOptions } from '../options/idempotency.options.js';
import type { RecordId } from '../records/stored-record.js';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../options/idempotency.tokens.js';
import { publishOnChannel } from './idempotency-channels.js';
import type { IdempotencyEvent, IdempotencyEventListener } from './idempotency-event.types.js';

export type * from './idempotency-event.types.js';

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
