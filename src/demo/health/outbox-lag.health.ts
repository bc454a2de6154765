import { Injectable } from '@nestjs/common';
import { HealthIndicatorService } from '@nestjs/terminus';
import { OutboxRelay } from '../../idempotency/outbox/index.js';

/** How old the oldest pending event may get before the instance reports itself degraded. */
export const OUTBOX_LAG_DEGRADED_SECONDS = 60;

/**
 * The outbox relay's lag as a Terminus indicator: `up` with the pending
 * events and the oldest one's age while the relay keeps up, `degraded` past
 * `OUTBOX_LAG_DEGRADED_SECONDS`, and `up` with `relay: 'off'` where this
 * instance does not deliver. Lag never takes the instance down: it still
 * takes orders, whose events wait in the outbox for the broker.
 */
@Injectable()
export class OutboxLagHealthIndicator {
  constructor(
    private readonly relay: OutboxRelay,
    private readonly health: HealthIndicatorService,
  ) {}

  async check<const Key extends string>(key: Key, degradedAfterSeconds = OUTBOX_LAG_DEGRADED_SECONDS) {
    const indicator = this.health.check(key);
    if (!this.relay.running) return indicator.up({ relay: 'off' });
    try {
      const { pending, oldestPendingAgeSeconds } = await this.relay.stats();
      const lag = { relay: 'on', pending, oldestPendingAgeSeconds };
      return oldestPendingAgeSeconds > degradedAfterSeconds ? indicator.degraded(lag) : indicator.up(lag);
    } catch (error) {
      return indicator.down({ relay: 'on', message: (error as Error).message });
    }
  }
}
