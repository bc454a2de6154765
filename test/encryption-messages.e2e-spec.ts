import { jetstream } from '@nats-io/jetstream';
import { connect, headers, type NatsConnection } from '@nats-io/transport-node';
import { Controller, Injectable, Module, type INestMicroservice } from '@nestjs/common';
import { EventPattern, Payload } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { type AttemptEvent, Idempotent, IdempotencyEvents, IdempotencyModule, IdempotencyRecord, idempotencyMigrations } from '../src/idempotency/index.js';
import { JetStreamTransport } from '../src/idempotency/nats/index.js';
import { IdempotencyMessagingModule } from '../src/idempotency/messaging/index.js';
import { NATS_URL, natsAdmin, natsAnswers, uniqueNames } from './support/nats.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

/** `@Idempotent()` message handlers record through the same codec: sealed outcomes, and no replay of one that does not open. */
const natsUp = await natsAnswers();
if (!natsUp) console.log(`skipping the encrypted message handler suite: no NATS server answers at ${NATS_URL}`);
const describeWithNats = natsUp ? describe : describe.skip;

@Injectable()
class Vouchers {
  calls = 0;

  issue(label: string): { voucher: string } {
    this.calls++;
    return { voucher: `voucher-${label}` };
  }
}

@Controller()
class VoucherConsumer {
  constructor(private readonly vouchers: Vouchers) {}

  @EventPattern('vouchers')
  @Idempotent()
  issue(@Payload() message: { label: string }) {
    return this.vouchers.issue(message.label);
  }
}

describeWithNats('encryption at rest of message handler outcomes (JetStream)', () => {
  let db: TestDatabase;
  let app: INestMicroservice;
  let connection: NatsConnection;
  let admin: Awaited<ReturnType<typeof natsAdmin>>;
  const names = uniqueNames('sealed');
  const attempts: AttemptEvent[] = [];

  const publish = (label: string, operationId: string) => {
    const h = headers();
    h.set('Operation-Id', operationId);
    return jetstream(connection).publish(`${names.subjectPrefix}.vouchers`, JSON.stringify({ label }), { headers: h });
  };
  const until = async (what: string, check: () => Promise<boolean> | boolean, timeoutMs = 15_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
      await sleep(25);
    }
  };
  const settled = () =>
    until('nothing is pending', async () => {
      const info = await admin.consumer(names.stream, `${names.durable}_vouchers`);
      return info.num_pending === 0 && info.num_ack_pending === 0;
    });
  const rowOf = async (key: string) =>
    (await db.query<{ fingerprint: string; response_headers: unknown; response_body: string }>(`SELECT fingerprint, response_headers, response_body FROM idempotency_records WHERE key = $1`, [key]))[0];

  beforeAll(async () => {
    db = await createTestDatabase();
    @Module({ controllers: [VoucherConsumer], providers: [Vouchers] })
    class ConsumerModule {}
    const moduleRef = await Test.createTestingModule({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: db.url, entities: [IdempotencyRecord], migrations: idempotencyMigrations, migrationsRun: true }),
        IdempotencyModule.forRoot({ tenant: 'shared', reaper: false, replayCacheSize: 0, encryption: { keys: [{ id: 'm1', key: randomBytes(32) }] } }),
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
    app.get(IdempotencyEvents).subscribe((event) => event.kind === 'attempt' && attempts.push(event));
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

  it('seals the outcome and keys the fingerprint, replays it for a repeat, and redelivers rather than replay a record that does not decrypt', async () => {
    const vouchers = app.get(Vouchers);
    await publish('gift', 'op-sealed');
    await settled();
    const row = await rowOf('op-sealed');
    expect(row.response_headers).toBeNull();
    expect(row.response_body).toMatch(/^v2\.m1\./);
    expect(row.response_body).not.toContain('voucher-gift');
    expect(row.fingerprint).toMatch(/^hmac\.m1\.[0-9a-f]{64}$/);

    await publish('gift', 'op-sealed');
    await settled();
    expect(vouchers.calls).toBe(1);
    expect(attempts.map((event) => event.outcome)).toEqual(['executed', 'replayed']);

    // A status no longer bound to the envelope: the repeat is not acknowledged, and keeps coming back.
    await db.query(`UPDATE idempotency_records SET response_status = 201 WHERE key = 'op-sealed'`);
    attempts.length = 0;
    await publish('gift', 'op-sealed');
    await until('two deliveries found the record undecryptable', () => attempts.filter((event) => event.outcome === 'undecryptable').length >= 2);
    expect(attempts[0]).toMatchObject({ outcome: 'undecryptable', undecryptable: 'authentication-failed' });
    expect(vouchers.calls).toBe(1);

    // Put right, the next redelivery replays it and is acknowledged.
    await db.query(`UPDATE idempotency_records SET response_status = 200 WHERE key = 'op-sealed'`);
    await settled();
    expect(attempts.at(-1)).toMatchObject({ outcome: 'replayed' });
    expect(vouchers.calls).toBe(1);
  });
});
