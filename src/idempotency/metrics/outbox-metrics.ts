import { Inject, Injectable, Optional } from '@nestjs/common';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { type IdempotencyEvent, IdempotencyEvents } from '../events/idempotency-events.js';
import { OutboxRelay } from '../outbox/outbox.relay.js';
import { IDEMPOTENCY_METRICS_REGISTRY } from './idempotency-metrics.js';

/**
 * Prometheus metrics of the outbox relay: counters from its events, and the
 * backlog (pending events, oldest pending age) read from the table at each
 * scrape, where IdempotencyOutboxModule is imported.
 */
@Injectable()
export class OutboxMetrics {
  private readonly published: Counter;
  private readonly failures: Counter<'reason'>;
  private readonly deadLetters: Counter<'type'>;
  private readonly reaped: Counter;
  private readonly batchSeconds: Histogram;

  constructor(events: IdempotencyEvents, @Inject(IDEMPOTENCY_METRICS_REGISTRY) registry: Registry, @Optional() relay?: OutboxRelay) {
    const registers = [registry];
    this.published = new Counter({ name: 'idempotency_outbox_published_total', help: 'Outbox events published and acknowledged by the broker (rate: published/s)', registers });
    this.failures = new Counter({ name: 'idempotency_outbox_publish_failures_total', help: 'Failed publishes: rejected (an attempt counted) or unavailable (the broker was unreachable; the batch paused)', labelNames: ['reason'], registers });
    this.deadLetters = new Counter({ name: 'idempotency_outbox_dead_letters_total', help: 'Outbox events that ran out of attempts', labelNames: ['type'], registers });
    this.reaped = new Counter({ name: 'idempotency_outbox_events_reaped_total', help: 'Settled outbox events deleted by the reaper', registers });
    this.batchSeconds = new Histogram({ name: 'idempotency_outbox_batch_seconds', help: 'Time of one relay batch: claim, publishes with their acks, marks', buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10], registers });
    if (relay) {
      let stats: Promise<{ pending: number; oldestPendingAgeSeconds: number }> | undefined;
      // One query per scrape feeds both gauges.
      const read = () => (stats ??= relay.stats().finally(() => setImmediate(() => (stats = undefined))));
      new Gauge({ name: 'idempotency_outbox_pending', help: 'Outbox events committed and not yet published', registers, collect: async function () { this.set((await read()).pending); } });
      new Gauge({ name: 'idempotency_outbox_oldest_pending_age_seconds', help: 'Age of the oldest pending outbox event: the relay lag', registers, collect: async function () { this.set((await read()).oldestPendingAgeSeconds); } });
    }
    events.subscribe((event) => this.record(event));
  }

  private record(event: IdempotencyEvent): void {
    switch (event.kind) {
      case 'outbox_relayed':
        this.published.inc(event.published);
        if (event.failed > 0) this.failures.inc({ reason: 'rejected' }, event.failed);
        if (event.unavailable) this.failures.inc({ reason: 'unavailable' });
        this.batchSeconds.observe(event.elapsedMs / 1000);
        return;
      case 'outbox_dead_letter':
        return this.deadLetters.inc({ type: event.type });
      case 'outbox_reaped':
        return this.reaped.inc(event.deleted);
    }
  }
}
