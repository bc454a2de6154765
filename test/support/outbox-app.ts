import { Body, Controller, HttpException, Injectable, Module, Post } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { setTimeout as sleep } from 'node:timers/promises';
import { Idempotent, IdempotencyModule, IdempotencyRecord, idempotencyMigrations, type IdempotencyModuleOptions, IdempotencyTransactionHost } from '../../src/idempotency/index.js';
import { IdempotencyOutboxModule, type NewOutboxEvent, Outbox, type OutboxMessage, type OutboxModuleOptions, type OutboxPublisher, OutboxPublisherUnavailableError } from '../../src/idempotency/outbox/index.js';
import { tenantFromHeader } from './ledger-app.js';

/** A publisher the test steers per event: it records what it acked, and rejects, or plays unavailable, when told. */
export class RecordingPublisher implements OutboxPublisher {
  /** What this publisher acked. */
  readonly mine: OutboxMessage[] = [];
  /** Events to reject (per-event failure), by type, how many times (Infinity: always). */
  readonly rejections = new Map<string, number>();
  unavailable = false;
  /** A delay per publish, in ms, so that relays overlap. */
  delayMs = 0;
  overlaps = 0;

  constructor(
    /** What all publishers sharing it acked, in order. */
    readonly published: OutboxMessage[] = [],
    /** Publishes in progress, by event id, shared likewise: a second concurrent publish of one event shows as an overlap. */
    private readonly inFlight = new Set<string>(),
  ) {}

  async publish(message: OutboxMessage): Promise<void> {
    if (this.unavailable) throw new OutboxPublisherUnavailableError('broker down (test)');
    if (this.inFlight.has(message.id)) this.overlaps++;
    this.inFlight.add(message.id);
    try {
      if (this.delayMs) await sleep(Math.random() * this.delayMs);
      const left = this.rejections.get(message.type) ?? 0;
      if (left > 0) {
        this.rejections.set(message.type, left - 1);
        throw new Error(`rejected ${message.type} (test)`);
      }
      this.published.push(message);
      this.mine.push(message);
    } finally {
      this.inFlight.delete(message.id);
    }
  }
}

interface NewEntry {
  label: string;
  events?: Array<{ type: string; key?: string }>;
  fail?: boolean;
}

/**
 * Events PostgreSQL cannot store, with the field `add()` must name. Built
 * here rather than sent: a request body holding a lone surrogate has no
 * fingerprint, and is refused before the handler runs.
 */
export const UNSTORABLE_EVENTS: ReadonlyArray<readonly [field: string, event: NewOutboxEvent]> = [
  ['payload.note', { type: 'entry.noted', payload: { note: 'a\u0000b' } }],
  ['payload.lines[1]', { type: 'entry.noted', payload: { lines: ['whole', 'cut \ud83d'] } }],
  ['headers.trace', { type: 'entry.noted', payload: {}, headers: { trace: 'x\u0000' } }],
  ['key', { type: 'entry.noted', payload: {}, key: 'order-\udc00' }],
];

@Injectable()
export class EventfulLedger {
  constructor(
    private readonly tx: IdempotencyTransactionHost,
    private readonly outbox: Outbox,
  ) {}

  async write(entry: NewEntry): Promise<{ entry: number; events: string[] }> {
    const [{ id }] = await this.tx.manager.query(`INSERT INTO ledger_entries (label) VALUES ($1) RETURNING id`, [entry.label]);
    const events: string[] = [];
    for (const event of entry.events ?? []) events.push(await this.outbox.add({ type: event.type, payload: { entry: Number(id), label: entry.label }, key: event.key }));
    if (entry.fail) throw new HttpException('failed after writing (test)', 500);
    return { entry: Number(id), events };
  }

  /** Tries each unstorable event and catches what it throws, as a handler may, then writes as `write` does. */
  async writeDespiteUnstorable(entry: NewEntry): Promise<{ entry: number; events: string[]; refused: string[] }> {
    const refused: string[] = [];
    for (const [, event] of UNSTORABLE_EVENTS) {
      try {
        await this.outbox.add(event);
      } catch (error) {
        refused.push((error as { field?: string }).field ?? String(error));
      }
    }
    return { ...(await this.write(entry)), refused };
  }
}

@Controller('eventful')
export class EventfulController {
  constructor(private readonly ledger: EventfulLedger) {}

  @Post()
  @Idempotent()
  create(@Body() body: NewEntry) {
    return this.ledger.write(body);
  }

  @Post('despite-unstorable')
  @Idempotent()
  despiteUnstorable(@Body() body: NewEntry) {
    return this.ledger.writeDespiteUnstorable(body);
  }
}

@Module({ controllers: [EventfulController], providers: [EventfulLedger] })
export class EventfulModule {}

export function outboxAppModules(databaseUrl: string, outbox: OutboxModuleOptions, options: Partial<IdempotencyModuleOptions> = {}) {
  return [
    TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl, entities: [IdempotencyRecord], migrations: idempotencyMigrations, migrationsRun: true }),
    IdempotencyModule.forRoot({ tenant: tenantFromHeader, reaper: false, replayCacheSize: 0, ...options }),
    IdempotencyOutboxModule.forRoot(outbox),
    EventfulModule,
  ];
}
