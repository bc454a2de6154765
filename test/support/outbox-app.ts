import { Body, Controller, HttpException, Injectable, Module, Post } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  Idempotent,
  IdempotencyModule,
  IdempotencyOutboxModule,
  IdempotencyRecord,
  idempotencyMigrations,
  type IdempotencyModuleOptions,
  Outbox,
  type OutboxMessage,
  type OutboxModuleOptions,
  type OutboxPublisher,
  OutboxPublisherUnavailableError,
  TransactionHost,
} from '../../src/idempotency/index.js';
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

@Injectable()
export class EventfulLedger {
  constructor(
    private readonly tx: TransactionHost,
    private readonly outbox: Outbox,
  ) {}

  async write(entry: NewEntry): Promise<{ entry: number; events: string[] }> {
    const [{ id }] = await this.tx.manager.query(`INSERT INTO ledger_entries (label) VALUES ($1) RETURNING id`, [entry.label]);
    const events: string[] = [];
    for (const event of entry.events ?? []) events.push(await this.outbox.add({ type: event.type, payload: { entry: Number(id), label: entry.label }, key: event.key }));
    if (entry.fail) throw new HttpException('failed after writing (test)', 500);
    return { entry: Number(id), events };
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
}

@Module({ controllers: [EventfulController], providers: [EventfulLedger] })
export class EventfulModule {}

export function outboxAppModules(databaseUrl: string, outbox: OutboxModuleOptions, options: IdempotencyModuleOptions = {}) {
  return [
    TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl, entities: [IdempotencyRecord], migrations: idempotencyMigrations, migrationsRun: true }),
    IdempotencyModule.forRoot({ tenant: tenantFromHeader, reaper: false, replayCacheSize: 0, ...options }),
    IdempotencyOutboxModule.forRoot(outbox),
    EventfulModule,
  ];
}
