import { jetstream } from '@nats-io/jetstream';
import { connect, headers, type NatsConnection } from '@nats-io/transport-node';
import { Controller, Injectable, Module, type INestMicroservice } from '@nestjs/common';
import { EventPattern, Payload } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { setTimeout as sleep } from 'node:timers/promises';
import { Idempotent, IdempotencyEvents, type IdempotencyEvent, IdempotencyModule, IdempotencyRecord, idempotencyMigrations, IdempotencyTransactionHost } from '../src/idempotency/index.js';
import { JetStreamTransport } from '../src/idempotency/nats/index.js';
import { IdempotencyMessagingModule } from '../src/idempotency/messaging/index.js';
import { LEDGER_SCHEMA } from './support/ledger-app.js';
import { NATS_URL, natsAdmin, natsAnswers, uniqueNames } from './support/nats.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

/**
 * `@Idempotent()` on message handlers, served by the JetStream transport:
 * what happens to a failing message, a repeated one and one without a key.
 */
const natsUp = await natsAnswers();
if (!natsUp) console.log(`skipping the idempotent message handler suite: no NATS server answers at ${NATS_URL}`);
const describeWithNats = natsUp ? describe : describe.skip;

interface EntryMessage {
  tenant: string;
  label: string;
  ref?: string;
}

@Injectable()
class MessageLedger {
  calls = 0;
  /** Failures still to throw, after writing. */
  failures = 0;

  constructor(private readonly tx: IdempotencyTransactionHost) {}

  async write(message: EntryMessage): Promise<{ entry: number }> {
    this.calls++;
    const [{ id }] = await this.tx.manager.query(`INSERT INTO ledger_entries (label) VALUES ($1) RETURNING id`, [message.label]);
    if (this.failures > 0) {
      this.failures--;
      throw new Error('handler failed after writing (test)');
    }
    return { entry: Number(id) };
  }
}

@Controller()
class EntryConsumer {
  constructor(private readonly ledger: MessageLedger) {}

  @EventPattern('entries')
  @Idempotent({ messageTenant: (message: EntryMessage) => message.tenant })
  entry(@Payload() message: EntryMessage) {
    return this.ledger.write(message);
  }

  @EventPattern('referenced')
  @Idempotent({ messageKey: (message: EntryMessage) => message.ref })
  referenced(@Payload() message: EntryMessage) {
    return this.ledger.write(message);
  }
}

describeWithNats('idempotent message handlers over JetStream', () => {
  let db: TestDatabase;
  let app: INestMicroservice;
  let connection: NatsConnection;
  let admin: Awaited<ReturnType<typeof natsAdmin>>;
  const names = uniqueNames('messages');
  const seen: IdempotencyEvent[] = [];
  let ledger: MessageLedger;

  const publish = async (pattern: string, message: EntryMessage, ids: { msgId?: string; operationId?: string } = {}) => {
    const h = headers();
    if (ids.operationId) h.set('Operation-Id', ids.operationId);
    await jetstream(connection).publish(`${names.subjectPrefix}.${pattern}`, JSON.stringify(message), { headers: h, ...(ids.msgId ? { msgID: ids.msgId } : {}) });
  };
  const entries = async (label: string) => Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM ledger_entries WHERE label = $1`, [label]))[0].n);
  const until = async (what: string, check: () => Promise<boolean> | boolean, timeoutMs = 15_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
      await sleep(25);
    }
  };
  const settled = (pattern: string) =>
    until(`${pattern} has nothing pending`, async () => {
      const info = await admin.consumer(names.stream, `${names.durable}_${pattern}`);
      return info.num_pending === 0 && info.num_ack_pending === 0;
    });

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(LEDGER_SCHEMA);
    @Module({ controllers: [EntryConsumer], providers: [MessageLedger] })
    class ConsumerModule {}
    const moduleRef = await Test.createTestingModule({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: db.url, entities: [IdempotencyRecord], migrations: idempotencyMigrations, migrationsRun: true }),
        IdempotencyModule.forRoot({ tenant: 'shared', reaper: false }),
        IdempotencyMessagingModule,
        ConsumerModule,
      ],
    }).compile();
    app = moduleRef.createNestMicroservice({
      strategy: new JetStreamTransport({
        servers: NATS_URL,
        stream: { name: names.stream, subjects: [`${names.subjectPrefix}.>`] },
        subjectPrefix: names.subjectPrefix,
        durable: names.durable,
        redeliveryBackoff: { baseMs: 50, maxMs: 200 },
      }),
      logger: false,
    });
    await app.listen();
    ledger = app.get(MessageLedger);
    app.get(IdempotencyEvents).subscribe((event) => seen.push(event));
    connection = await connect({ servers: NATS_URL });
    admin = await natsAdmin();
  });
  afterAll(async () => {
    await app?.close();
    await connection?.close();
    await admin?.deleteStream(names.stream);
    await admin?.close();
    await db?.drop();
  });
  beforeEach(() => {
    ledger.calls = 0;
    ledger.failures = 0;
    seen.length = 0;
  });

  it('runs a message once and records it under its tenant scope', async () => {
    await publish('entries', { tenant: 'acme', label: 'once' }, { msgId: 'op-once', operationId: 'op-once' });
    await settled('entries');
    expect(await entries('once')).toBe(1);
    expect(await db.query(`SELECT scope, operation, status FROM idempotency_records WHERE key = 'op-once'`)).toEqual([
      { scope: 'tenant:acme', operation: 'event entries', status: 'completed' },
    ]);
  });

  it('does not acknowledge a failing message and releases its key, so the redelivery runs it again', async () => {
    ledger.failures = 2;
    await publish('entries', { tenant: 'acme', label: 'flaky' }, { operationId: 'op-flaky' });
    await until('the third delivery succeeded', () => ledger.calls === 3);
    await settled('entries');
    expect(await entries('flaky')).toBe(1); // the failed attempts' writes rolled back with their claims
    expect(seen.filter((event) => event.kind === 'attempt').map((event) => (event as { outcome: string }).outcome)).toEqual(['rolled_back', 'rolled_back', 'executed']);
  });

  it('acknowledges a repeat of a completed message without running the handler (beyond the duplicate window too)', async () => {
    const message = { tenant: 'acme', label: 'repeated' };
    await publish('entries', message, { operationId: 'op-repeated' });
    await settled('entries');
    // A second copy in the stream (no Nats-Msg-Id, so JetStream keeps both), as after a re-publish past its window.
    await publish('entries', message, { operationId: 'op-repeated' });
    await settled('entries');
    expect(ledger.calls).toBe(1);
    expect(await entries('repeated')).toBe(1);
    expect(seen.filter((event) => event.kind === 'attempt').map((event) => (event as { outcome: string }).outcome)).toEqual(['executed', 'replayed']);
  });

  it('keeps tenants apart: one operation id under two tenants runs twice', async () => {
    await publish('entries', { tenant: 'acme', label: 'scoped' }, { operationId: 'op-scoped' });
    await publish('entries', { tenant: 'globex', label: 'scoped' }, { operationId: 'op-scoped' });
    await settled('entries');
    expect(await entries('scoped')).toBe(2);
  });

  it('terminates a message without a key instead of running it unprotected', async () => {
    await publish('entries', { tenant: 'acme', label: 'keyless' });
    await settled('entries');
    await sleep(300);
    expect(ledger.calls).toBe(0);
    expect(seen).toContainEqual(expect.objectContaining({ kind: 'attempt', outcome: 'key_missing' }));
  });

  it('takes the key from the message when told to', async () => {
    await publish('referenced', { tenant: 'acme', label: 'by-ref', ref: 'ref-1' });
    await publish('referenced', { tenant: 'acme', label: 'by-ref', ref: 'ref-1' });
    await settled('referenced');
    expect(await entries('by-ref')).toBe(1);
    expect(await db.query(`SELECT scope, operation FROM idempotency_records WHERE key = 'ref-1'`)).toEqual([{ scope: 'anonymous', operation: 'event referenced' }]);
  });
});
