import { randomUUID } from 'node:crypto';
import type { EventEmitter } from 'node:events';
import type { IncomingHttpHeaders } from 'node:http';
import { performance } from 'node:perf_hooks';
import type autocannon from 'autocannon';
import hdr from 'hdr-histogram-js';
import type { BurstOverlap, KeyPlan, LoadTarget, PhaseResult } from './load-protocol.js';

const REPLAYED_HEADER = 'idempotent-replayed';

/** Per connection: the request in flight (pipelining is 1, so there is one at a time). */
interface InFlight {
  key: string;
  sentAt: number;
  sent: number;
  /** The `aim()` it was built under: answers to requests aimed elsewhere are not tallied. */
  aim: number;
}

interface BurstGroup {
  expected: number;
  answered: number;
  lastSentAt: number;
  firstAnsweredAt: number;
}

/** What the connections were answered since they started, or since the last `takeTally()`. */
export type ClientTally = Pick<PhaseResult, 'responses' | 'statusCounts' | 'non2xx' | 'replayed2xx' | 'fresh2xx' | 'latencyMs'>;

/**
 * Gives every autocannon connection its own request whose `Idempotency-Key`
 * follows a {@link KeyPlan}, and tallies answers: statuses, replays,
 * latency and, for bursts, whether each group of duplicates was really in
 * flight at once. `aim()` sends the next requests elsewhere over the same
 * connections.
 *
 * Every scenario goes through this, the ones whose route ignores the key
 * too, so that the load generator spends the same work per request in all.
 */
export class KeyedClients {
  private responses = 0;
  private statusCounts: Record<string, number> = {};
  private replayed2xx = 0;
  private fresh2xx = 0;
  /** Microseconds from write to complete response, 3 significant digits; autocannon's own histogram keeps whole milliseconds only. */
  private readonly latencyMicros = hdr.build({ numberOfSignificantValueDigits: 3 });
  private clients = 0;
  private cycled = 0;
  private aims = 0;
  private readonly groups = new Map<string, BurstGroup>();

  /** Without a `path`, requests go to the path of autocannon's URL. */
  constructor(
    private plan: KeyPlan,
    private readonly connections: number,
    private path?: string,
  ) {}

  /** Requests built from now on go to `target`; the answers to those in flight are not tallied. */
  aim(target: LoadTarget): void {
    this.plan = target.keys;
    this.path = target.path;
    this.aims++;
  }

  /** The tally so far, which then starts again from zero. */
  takeTally(): ClientTally {
    const tally: ClientTally = {
      responses: this.responses,
      statusCounts: this.statusCounts,
      non2xx: this.responses - this.replayed2xx - this.fresh2xx,
      replayed2xx: this.replayed2xx,
      fresh2xx: this.fresh2xx,
      latencyMs: latencySummary(this.latencyMicros),
    };
    this.responses = this.replayed2xx = this.fresh2xx = 0;
    this.statusCounts = {};
    this.latencyMicros.reset();
    return tally;
  }

  /** autocannon's `setupClient`: called once per connection, before it connects. */
  readonly setupClient = (client: autocannon.Client): void => {
    const index = this.clients++;
    const inFlight: InFlight = { key: '', sentAt: 0, sent: 0, aim: 0 };
    // Emitted right before each write, after the request was built; not in autocannon's typings.
    (client as EventEmitter).on('request', () => {
      inFlight.sentAt = performance.now();
    });
    client.setRequests([
      {
        setupRequest: (request) => {
          inFlight.key = this.keyFor(index, inFlight.sent++);
          inFlight.aim = this.aims;
          (request.headers ??= {})['idempotency-key'] = inFlight.key;
          if (this.path !== undefined) request.path = this.path;
          return request;
        },
        onResponse: (status, _body, _context, headers) => this.record(index, inFlight, status, headers ?? {}),
      },
    ]);
  };

  /** The burst groups' overlap, when the plan is `burst`. */
  burstOverlap(): BurstOverlap | undefined {
    if (this.plan.mode !== 'burst') return undefined;
    let completeGroups = 0;
    let overlappingGroups = 0;
    for (const group of this.groups.values()) {
      if (group.answered < group.expected) continue;
      completeGroups++;
      if (group.lastSentAt < group.firstAnsweredAt) overlappingGroups++;
    }
    return { completeGroups, overlappingGroups };
  }

  private keyFor(client: number, sent: number): string {
    const plan = this.plan;
    switch (plan.mode) {
      case 'fresh':
        return `${plan.prefix}-c${client}-${sent}`;
      case 'cycle':
        return `${plan.prefix}-${this.cycled++ % plan.poolSize}`;
      case 'burst':
        return `${plan.prefix}-g${Math.floor(client / plan.burstSize)}-${sent}`;
      case 'random':
        return randomUUID();
    }
  }

  private record(client: number, inFlight: InFlight, status: number, headers: IncomingHttpHeaders): void {
    if (inFlight.aim !== this.aims) return;
    this.latencyMicros.recordValue(Math.round((performance.now() - inFlight.sentAt) * 1000));
    this.responses++;
    this.statusCounts[status] = (this.statusCounts[status] ?? 0) + 1;
    if (status >= 200 && status < 300) {
      if (isReplayed(headers)) this.replayed2xx++;
      else this.fresh2xx++;
    }
    if (this.plan.mode === 'burst') this.recordBurstMember(client, inFlight);
  }

  private recordBurstMember(client: number, inFlight: InFlight): void {
    const now = performance.now();
    let group = this.groups.get(inFlight.key);
    if (!group) {
      group = { expected: this.groupSize(client), answered: 0, lastSentAt: 0, firstAnsweredAt: Infinity };
      this.groups.set(inFlight.key, group);
    }
    group.answered++;
    group.lastSentAt = Math.max(group.lastSentAt, inFlight.sentAt);
    group.firstAnsweredAt = Math.min(group.firstAnsweredAt, now);
  }

  /** The last group is smaller when the connections do not divide evenly. */
  private groupSize(client: number): number {
    if (this.plan.mode !== 'burst') return 1;
    const first = Math.floor(client / this.plan.burstSize) * this.plan.burstSize;
    return Math.min(this.plan.burstSize, this.connections - first);
  }
}

/** Percentiles from an HDR histogram of microseconds, in milliseconds; NaN without values. */
function latencySummary(histogram: ReturnType<typeof hdr.build>): PhaseResult['latencyMs'] {
  if (histogram.totalCount === 0) return { average: NaN, p50: NaN, p90: NaN, p99: NaN, max: NaN };
  const ms = (micros: number) => micros / 1000;
  return {
    average: Math.round(histogram.mean) / 1000,
    p50: ms(histogram.getValueAtPercentile(50)),
    p90: ms(histogram.getValueAtPercentile(90)),
    p99: ms(histogram.getValueAtPercentile(99)),
    max: ms(histogram.maxValue),
  };
}

function isReplayed(headers: IncomingHttpHeaders): boolean {
  for (const name in headers) {
    if (name.length === REPLAYED_HEADER.length && name.toLowerCase() === REPLAYED_HEADER) return String(headers[name]) === 'true';
  }
  return false;
}
