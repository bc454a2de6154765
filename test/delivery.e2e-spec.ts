import { connect } from '@nats-io/transport-node';
import { setTimeout as sleep } from 'node:timers/promises';
import { JetStreamPublisher } from '../src/idempotency/nats/index.js';
import { OPERATION_ID_HEADER } from '../src/idempotency/messaging/index.js';
import { ACME } from './support/demo.js';
import { type DemoProcess, startDemoProcess } from './support/demo-process.js';
import { NATS_URL, natsAdmin, natsAnswers, NATS_SERVER_BINARY, startPrivateNats, uniqueNames } from './support/nats.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

/**
 * The path past the HTTP edge, against a real NATS JetStream: the demo's
 * order commits with its outbox event, the relay publishes it, and the
 * fulfilment consumer creates exactly one shipment, through crashes of the
 * relay and the consumer at the points no transaction covers, and a restart
 * of NATS. The demo runs in child processes, so that a crash is a real
 * SIGKILL. Skipped, with a line saying so, when no NATS server answers.
 */
const natsUp = await natsAnswers();
if (!natsUp) console.log(`skipping the NATS delivery suites: no NATS server answers at ${NATS_URL} (set NATS_URL to use another)`);
const describeWithNats = natsUp ? describe : describe.skip;
if (natsUp && !NATS_SERVER_BINARY) console.log('skipping the NATS restart test: no nats-server on PATH (or NATS_SERVER_BINARY) to start a private one');

// Child processes and a broker: slow on a loaded machine, and nothing here times anything.
describeWithNats('delivery through NATS JetStream', { timeout: 60_000 }, () => {
  let db: TestDatabase;
  let admin: Awaited<ReturnType<typeof natsAdmin>>;
  const streams: string[] = [];
  const demos: DemoProcess[] = [];

  /** A demo process on this suite's database, with its own stream and subjects unless given. */
  const startDemo = async (names: ReturnType<typeof uniqueNames>, env: Record<string, string> = {}) => {
    const demo = await startDemoProcess({
      DATABASE_URL: db.url,
      NATS_URL,
      NATS_STREAM: names.stream,
      NATS_SUBJECT_PREFIX: names.subjectPrefix,
      NATS_DURABLE: names.durable,
      FULFILMENT_ACK_WAIT_MS: '1000',
      REAPER_INTERVAL_MS: '0',
      TENANT_RATE_LIMIT: '0',
      ...env,
    });
    demos.push(demo);
    return demo;
  };
  const names = (label: string) => {
    const picked = uniqueNames(label);
    streams.push(picked.stream);
    return picked;
  };
  const createOrder = async (demo: DemoProcess, key: string) => {
    const response = await fetch(`${demo.url}/orders`, {
      method: 'POST',
      headers: { authorization: ACME, 'idempotency-key': key, 'content-type': 'application/json' },
      body: JSON.stringify({ sku: `sku-${key}`, quantity: 1 }),
    });
    expect(response.status).toBe(201);
    return (await response.json()) as { id: string };
  };
  const shipmentsOf = async (orderId: string) => Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM shipments WHERE order_id = $1`, [orderId]))[0].n);
  const eventOf = async (orderId: string) => (await db.query<{ id: string; status: string }>(`SELECT id, status FROM idempotency_outbox WHERE ordering_key = $1`, [orderId]))[0];
  const until = async (what: string, check: () => Promise<boolean>, timeoutMs = 20_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
      await sleep(50);
    }
  };
  const exited = (demo: DemoProcess) => new Promise<void>((resolve) => (demo.child.exitCode !== null || demo.child.signalCode !== null ? resolve() : demo.child.once('exit', () => resolve())));

  beforeAll(async () => {
    db = await createTestDatabase();
    admin = await natsAdmin();
  });
  afterEach(async () => {
    for (const demo of demos.splice(0)) if (demo.child.exitCode === null && demo.child.signalCode === null) await demo.kill();
  });
  afterAll(async () => {
    for (const stream of streams) await admin?.deleteStream(stream);
    await admin?.close();
    await db?.drop();
  });

  it('ships an order once: order commit, outbox, relay, JetStream, consumer; GET /orders/:id shows the shipment', async () => {
    const picked = names('e2e');
    const demo = await startDemo(picked);
    const order = await createOrder(demo, 'e2e-1');
    await until('the order is shipped', async () => (await shipmentsOf(order.id)) === 1);
    const detail = (await (await fetch(`${demo.url}/orders/${order.id}`, { headers: { authorization: ACME } })).json()) as { shipment: { orderId: string } | null };
    expect(detail.shipment).toMatchObject({ orderId: order.id });
    await until('the event is marked sent', async () => (await eventOf(order.id)).status === 'sent');
    expect(await admin.messages(picked.stream)).toBe(1);
    const health = await fetch(`${demo.url}/health`);
    expect(health.status).toBe(200);
    expect(((await health.json()) as { details: unknown }).details).toMatchObject({ outbox: { status: 'up', relay: 'on', pending: 0 } });
    // The consumer's record is keyed by the event's id, in the order's tenant scope.
    const event = await eventOf(order.id);
    expect(await db.query(`SELECT scope, operation, status FROM idempotency_records WHERE key = $1`, [event.id])).toEqual([
      { scope: 'tenant:acme', operation: 'event order.created', status: 'completed' },
    ]);
  });

  it('redelivers after the consumer dies between its commit and its ack, and the redelivery replays', async () => {
    const picked = names('ack');
    const crashing = await startDemo(picked, { FAULT_CRASH_AFTER_COMMIT: '1' });
    const order = await createOrder(crashing, 'ack-1');
    await exited(crashing);
    expect(crashing.child.signalCode).toBe('SIGKILL');
    expect(await shipmentsOf(order.id)).toBe(1); // committed before the crash
    const event = await eventOf(order.id);
    const consumerName = `${picked.durable}_order_created`;
    expect((await admin.consumer(picked.stream, consumerName)).num_ack_pending).toBe(1); // never acked

    await startDemo(picked);
    await until('the redelivery is acked', async () => {
      const info = await admin.consumer(picked.stream, consumerName);
      return info.num_ack_pending === 0 && info.num_pending === 0 && info.num_redelivered === 0 && info.ack_floor.stream_seq === 1;
    });
    expect(await shipmentsOf(order.id)).toBe(1);
    expect(await db.query(`SELECT status FROM idempotency_records WHERE key = $1`, [event.id])).toEqual([{ status: 'completed' }]);
  });

  it('publishes again after the relay dies between the publish ack and marking sent: the stream drops the duplicate', async () => {
    const picked = names('relay');
    const crashing = await startDemo(picked, { FAULT_CRASH_AFTER_PUBLISH: '1', FULFILMENT_CONSUMER: 'off' });
    const order = await createOrder(crashing, 'relay-1');
    await exited(crashing);
    expect(crashing.child.signalCode).toBe('SIGKILL');
    expect(await eventOf(order.id)).toMatchObject({ status: 'pending' }); // published, never marked
    expect(await admin.messages(picked.stream)).toBe(1);

    await startDemo(picked);
    await until('the event is marked sent', async () => (await eventOf(order.id)).status === 'sent');
    await until('the order is shipped', async () => (await shipmentsOf(order.id)) === 1);
    expect(await admin.messages(picked.stream)).toBe(1); // the re-publish was a duplicate within the window
    await sleep(500);
    expect(await shipmentsOf(order.id)).toBe(1);
  });

  it('dead-letters an event JetStream keeps refusing, and goes on with the others', async () => {
    const picked = names('dead');
    // The stream takes messages up to 2 KiB; one event is made larger before any relay runs.
    const connection = await connect({ servers: NATS_URL });
    await JetStreamPublisher.create(connection, { stream: { name: picked.stream, subjects: [`${picked.subjectPrefix}.>`], maxMessageSize: 2048 } });
    await connection.close();
    const writer = await startDemo(picked, { OUTBOX_RELAY: 'off', FULFILMENT_CONSUMER: 'off' });
    const large = await createOrder(writer, 'dead-1');
    const small = await createOrder(writer, 'dead-2');
    await writer.kill();
    await db.query(`UPDATE idempotency_outbox SET payload = jsonb_set(payload, '{note}', to_jsonb(repeat('x', 5000))) WHERE ordering_key = $1`, [large.id]);
    await startDemo(picked, { FULFILMENT_CONSUMER: 'off', OUTBOX_MAX_ATTEMPTS: '2', OUTBOX_BACKOFF_MS: '50' });
    await until('the large event is a dead letter', async () => (await eventOf(large.id)).status === 'dead');
    await until('the small event is sent', async () => (await eventOf(small.id)).status === 'sent');
    expect((await db.query(`SELECT attempts, last_error FROM idempotency_outbox WHERE ordering_key = $1`, [large.id]))[0]).toMatchObject({ attempts: 2, last_error: expect.stringMatching(/size|maximum|exceed/i) });
    expect(await admin.messages(picked.stream)).toBe(1);
  });

  const withBinary = NATS_SERVER_BINARY && natsUp ? it : it.skip;
  withBinary('rides out a NATS restart: events committed while it is down are delivered once it is back', async () => {
    const nats = await startPrivateNats();
    if (!nats) return console.log('skipping the NATS restart test: no nats-server on PATH (or NATS_SERVER_BINARY)');
    try {
      const picked = uniqueNames('restart');
      const demo = await startDemo(picked, { NATS_URL: nats.url });
      const before = await createOrder(demo, 'restart-1');
      await until('the first order is shipped', async () => (await shipmentsOf(before.id)) === 1);
      await nats.stop();
      const during = await createOrder(demo, 'restart-2'); // the API does not need NATS
      await sleep(1500);
      expect(await eventOf(during.id)).toMatchObject({ status: 'pending' });
      await nats.start();
      await until('the order created during the outage is shipped', async () => (await shipmentsOf(during.id)) === 1, 30_000);
      expect(await shipmentsOf(before.id)).toBe(1);
      expect((await db.query(`SELECT attempts FROM idempotency_outbox WHERE ordering_key = $1`, [during.id]))[0]).toEqual({ attempts: 1 });
    } finally {
      for (const demo of demos.splice(0)) if (demo.child.exitCode === null && demo.child.signalCode === null) await demo.kill();
      await nats.dispose();
    }
  }, 60_000);

  it('carries the event id as Nats-Msg-Id and Operation-Id', async () => {
    const picked = names('headers');
    const demo = await startDemo(picked, { FULFILMENT_CONSUMER: 'off' });
    const order = await createOrder(demo, 'headers-1');
    await until('the event is sent', async () => (await eventOf(order.id)).status === 'sent');
    const connection = await connect({ servers: NATS_URL });
    try {
      const { jetstreamManager } = await import('@nats-io/jetstream');
      const stored = await (await jetstreamManager(connection)).streams.getMessage(picked.stream, { seq: 1 });
      const event = await eventOf(order.id);
      expect(stored!.header.get('Nats-Msg-Id')).toBe(event.id);
      expect(stored!.header.get(OPERATION_ID_HEADER)).toBe(event.id);
      expect(stored!.subject).toBe(`${picked.subjectPrefix}.order.created`);
    } finally {
      await connection.close();
    }
  });
});
