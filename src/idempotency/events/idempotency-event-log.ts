import { Injectable, Logger } from '@nestjs/common';
import { type IdempotencyEvent, IdempotencyEvents } from './idempotency-events.js';

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
