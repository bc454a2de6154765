import { HealthIndicatorService } from '@nestjs/terminus';
import type { OutboxRelay, OutboxStats } from '../../idempotency/outbox/index.js';
import { OUTBOX_LAG_DEGRADED_SECONDS, OutboxLagHealthIndicator } from './outbox-lag.health.js';

const indicatorWith = (running: boolean, stats: () => Promise<OutboxStats>) =>
  new OutboxLagHealthIndicator({ running, stats } as unknown as OutboxRelay, new HealthIndicatorService());

describe('OutboxLagHealthIndicator', () => {
  it.each([
    ['delivery off', false, { pending: 9, oldestPendingAgeSeconds: 9999 }, { status: 'up', relay: 'off' }],
    ['keeping up', true, { pending: 2, oldestPendingAgeSeconds: 1 }, { status: 'up', relay: 'on', pending: 2, oldestPendingAgeSeconds: 1 }],
    ['at the threshold', true, { pending: 1, oldestPendingAgeSeconds: OUTBOX_LAG_DEGRADED_SECONDS }, { status: 'up', relay: 'on' }],
    ['lagging', true, { pending: 50, oldestPendingAgeSeconds: OUTBOX_LAG_DEGRADED_SECONDS + 1 }, { status: 'degraded', relay: 'on', pending: 50 }],
  ])('%s', async (_, running, stats, expected) => {
    expect((await indicatorWith(running, async () => stats).check('outbox')).outbox).toMatchObject(expected);
  });

  it('is down when the relay cannot read its stats', async () => {
    const result = await indicatorWith(true, () => Promise.reject(new Error('connection refused'))).check('outbox');
    expect(result.outbox).toEqual({ status: 'down', relay: 'on', message: 'connection refused' });
  });
});
