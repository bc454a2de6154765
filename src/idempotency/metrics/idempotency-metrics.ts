import { Inject, Injectable } from '@nestjs/common';
import { Counter, Histogram, type Registry } from 'prom-client';
import { type AttemptEvent, type IdempotencyEvent, IdempotencyEvents } from '../events/idempotency-events.js';

/** The injection token of the prom-client `Registry` the metrics register in. */
export const IDEMPOTENCY_METRICS_REGISTRY = Symbol('idempotency:metrics-registry');

const SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/**
 * Prometheus metrics built on the module's events, labelled by operation and
 * outcome, never by key or tenant (both unbounded, and the key is a secret).
 */
@Injectable()
export class IdempotencyMetrics {
  private readonly attempts: Counter<'operation' | 'outcome'>;
  private readonly executions: Counter<'operation'>;
  private readonly replays: Counter<'operation' | 'path'>;
  private readonly collisions: Counter<'operation' | 'result'>;
  private readonly mismatches: Counter<'operation'>;
  private readonly keyRejections: Counter<'operation' | 'reason'>;
  private readonly takeovers: Counter<'operation' | 'kind'>;
  private readonly commitFailures: Counter<'operation'>;
  private readonly reaped: Counter;
  private readonly leasesExpired: Counter<'operation' | 'result'>;
  private readonly claimWait: Histogram<'operation'>;
  private readonly handlerTime: Histogram<'operation'>;
  private readonly adminActions: Counter<'action' | 'result'>;

  constructor(events: IdempotencyEvents, @Inject(IDEMPOTENCY_METRICS_REGISTRY) registry: Registry) {
    const registers = [registry];
    this.attempts = new Counter({ name: 'idempotency_attempts_total', help: 'Physical attempts: requests to idempotent routes, by outcome', labelNames: ['operation', 'outcome'], registers });
    this.executions = new Counter({ name: 'idempotency_executions_total', help: 'Logical operations: first executions whose outcome was recorded', labelNames: ['operation'], registers });
    this.replays = new Counter({ name: 'idempotency_replays_total', help: 'Replays of recorded outcomes, immediate or after waiting on an in-flight owner', labelNames: ['operation', 'path'], registers });
    this.collisions = new Counter({ name: 'idempotency_in_progress_collisions_total', help: 'Requests that met an in-flight owner: replayed after waiting, ran after its rollback, or got 409', labelNames: ['operation', 'result'], registers });
    this.mismatches = new Counter({ name: 'idempotency_fingerprint_mismatches_total', help: 'Keys reused with a different request (422)', labelNames: ['operation'], registers });
    this.keyRejections = new Counter({ name: 'idempotency_key_rejections_total', help: 'Requests refused for a missing or malformed key (400)', labelNames: ['operation', 'reason'], registers });
    this.takeovers = new Counter({ name: 'idempotency_takeovers_total', help: 'Records taken over by a request: expired ones, or phased claims whose lease lapsed', labelNames: ['operation', 'kind'], registers });
    this.commitFailures = new Counter({ name: 'idempotency_commit_failures_total', help: 'COMMITs of claim transactions that failed', labelNames: ['operation'], registers });
    this.reaped = new Counter({ name: 'idempotency_records_reaped_total', help: 'Expired records deleted by the reaper', registers });
    this.leasesExpired = new Counter({ name: 'idempotency_leases_expired_total', help: 'Abandoned phased claims taken over by the completer, by what became of them', labelNames: ['operation', 'result'], registers });
    this.claimWait = new Histogram({ name: 'idempotency_claim_wait_seconds', help: 'Time to claim a key, waits on in-flight owners included', labelNames: ['operation'], buckets: SECONDS, registers });
    this.handlerTime = new Histogram({ name: 'idempotency_handler_seconds', help: 'Time in the handler of first executions', labelNames: ['operation'], buckets: SECONDS, registers });
    this.adminActions = new Counter({ name: 'idempotency_admin_actions_total', help: 'Operators\' actions (release, fail, requeue): done or refused', labelNames: ['action', 'result'], registers });
    events.subscribe((event) => this.record(event));
  }

  private record(event: IdempotencyEvent): void {
    switch (event.kind) {
      case 'attempt':
        return this.recordAttempt(event);
      case 'commit_failed':
        return this.commitFailures.inc({ operation: event.operation });
      case 'reaped':
        return this.reaped.inc(event.deleted);
      case 'lease_expired':
        return this.leasesExpired.inc({ operation: event.operation, result: event.result });
      case 'admin_action':
        return this.adminActions.inc({ action: event.action, result: event.result });
    }
  }

  private recordAttempt(event: AttemptEvent): void {
    const { operation, outcome } = event;
    this.attempts.inc({ operation, outcome });
    if (outcome === 'executed') this.executions.inc({ operation });
    if (outcome === 'replayed') this.replays.inc({ operation, path: event.collided ? 'after_wait' : 'immediate' });
    if (event.collided) this.collisions.inc({ operation, result: outcome === 'conflict' ? 'conflict' : outcome === 'executed' ? 'executed' : 'replayed' });
    if (outcome === 'key_reused') this.mismatches.inc({ operation });
    if (outcome === 'key_missing' || outcome === 'key_malformed') this.keyRejections.inc({ operation, reason: outcome === 'key_missing' ? 'missing' : 'malformed' });
    if (event.tookOver) this.takeovers.inc({ operation, kind: event.tookOver });
    if (event.claimMs !== undefined) this.claimWait.observe({ operation }, event.claimMs / 1000);
    if (event.handlerMs !== undefined) this.handlerTime.observe({ operation }, event.handlerMs / 1000);
  }
}
