import { randomUUID } from 'node:crypto';
import type { EventEmitter } from 'node:events';
import type { IncomingHttpHeaders } from 'node:http';
import { performance } from 'node:perf_hooks';
import type autocannon from 'autocannon';
import hdr from 'hdr-histogram-js';
import type { BurstOverlap, KeyPlan } from './load-protocol.js';

const REPLAYED_HEADER = 'idempotent-replayed';

/** Per connection: the request in flight (pipelining is 1, so there is one at a time). */
interface InFlight {
  key: string;
  sentAt: number;
  sent: number;
}

interface BurstGroup {
  expected: number;
  answered: number;
  lastSentAt: number;
  firstAnsweredAt: number;
}

/**
 * Gives every autocannon connection its own request whose `Idempotency-Key`
 * follows a {@link KeyPlan}, and tallies replayed answers and, for bursts,
 * whether each group of duplicates was really in flight at once.
 *
 * Every scenario goes through this, the ones whose route ignores the key
 * too, so that the load generator spends the same work per request in all.
 */
export class KeyedClients {
  replayed2xx = 0;
  fresh2xx = 0;
  /** Microseconds from write to complete response, 3 significant digits; autocannon's own histogram keeps whole milliseconds only. */
  readonly latencyMicros = hdr.build({ numberOfSignificantValueDigits: 3 });
  private clients = 0;
  private cycled = 0;
  private readonly groups = new Map<string, BurstGroup>();

  constructor(
    private readonly plan: KeyPlan,
    private readonly connections: number,
  ) {}

  /** autocannon's `setupClient`: called once per connection, before it connects. */
  readonly setupClient = (client: autocannon.Client): void => {
    const index = this.clients++;
    const inFlight: InFlight = { key: '', sentAt: 0, sent: 0 };
    // Emitted right before each write, after the request was built; not in autocannon's typings.
    (client as EventEmitter).on('request', () => {
      inFlight.sentAt = performance.now();
    });
    client.setRequests([
      {
        setupRequest: (request) => {
          inFlight.key = this.keyFor(index, inFlight.sent++);
          (request.headers ??= {})['idempotency-key'] = inFlight.key;
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
    this.latencyMicros.recordValue(Math.round((performance.now() - inFlight.sentAt) * 1000));
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

function isReplayed(headers: IncomingHttpHeaders): boolean {
  for (const name in headers) {
    if (name.length === REPLAYED_HEADER.length && name.toLowerCase() === REPLAYED_HEADER) return String(headers[name]) === 'true';
  }
  return false;
}
