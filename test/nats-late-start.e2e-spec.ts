import { existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { ACME } from './support/demo.js';
import { type ChildDemo, type DemoProcess, startDemoProcess, startWorkerProcess } from './support/demo-process.js';
import { NATS_SERVER_BINARY, type PrivateNats, reservePrivateNats, uniqueNames } from './support/nats.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

/**
 * An instance or a worker started while no NATS server answers: it starts
 * (the instance serves HTTP, its events wait in the outbox) and connects
 * once NATS is there, after which the waiting events are delivered. The
 * NATS server is a private one, started after the processes.
 */
const binaryFound = NATS_SERVER_BINARY !== undefined && existsSync(NATS_SERVER_BINARY);
if (!binaryFound) console.log('skipping the NATS late start suite: no nats-server on PATH (or at NATS_SERVER_BINARY) to start a private one');
const describeWithBinary = binaryFound ? describe : describe.skip;

/** Lines of one logger context: `[JetStreamPublisher]` (the relay's) or `[JetStreamTransport]` (the consumer's). */
const linesOf = (child: ChildDemo, context: string) => child.output().split('\n').filter((line) => line.includes(`[${context}]`));

describeWithBinary('NATS started after the demo', () => {
  let db: TestDatabase;
  let nats: PrivateNats;
  let natsDownSince: number;
  let natsDownMs: number;
  const processes: ChildDemo[] = [];

  const delivery = (label: string) => {
    const names = uniqueNames(label);
    return {
      DATABASE_URL: db.url,
      NATS_URL: nats.url,
      NATS_STREAM: names.stream,
      NATS_SUBJECT_PREFIX: names.subjectPrefix,
      NATS_DURABLE: names.durable,
      REAPER_INTERVAL_MS: '0',
      TENANT_RATE_LIMIT: '0',
    };
  };
  const started = <T extends ChildDemo>(child: T) => {
    processes.push(child);
    return child;
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
  const eventOf = async (orderId: string) => (await db.query<{ status: string; attempts: number }>(`SELECT status, attempts FROM idempotency_outbox WHERE ordering_key = $1`, [orderId]))[0];
  const until = async (what: string, check: () => Promise<boolean>, timeoutMs: number) => {
    const deadline = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
      await sleep(50);
    }
  };
  const alive = (child: ChildDemo) => child.child.exitCode === null && child.child.signalCode === null;

  /** With NATS still down: the order is taken, its event waits, and /health keeps the instance in service. */
  const orderWhileNatsIsDown = async (demo: DemoProcess, key: string) => {
    const order = await createOrder(demo, key);
    await sleep(1500);
    expect(await eventOf(order.id)).toMatchObject({ status: 'pending' });
    expect((await fetch(`${demo.url}/health`)).status).toBe(200);
    return order;
  };

  /** Once NATS is up: the order ships exactly once, its event went out on its first attempt, and nobody exited. */
  const deliveredOnceNatsIsUp = async (orderId: string) => {
    natsDownMs = Date.now() - natsDownSince;
    await nats.start();
    await until('the order is shipped', async () => (await shipmentsOf(orderId)) === 1, 30_000);
    await until('the event is marked sent', async () => (await eventOf(orderId)).status === 'sent', 5_000);
    expect(await eventOf(orderId)).toMatchObject({ attempts: 1 });
    await sleep(500);
    expect(await shipmentsOf(orderId)).toBe(1);
    for (const child of processes) expect(alive(child), child.output()).toBe(true);
  };

  /** A warning per failed attempt, spaced by a backoff (a retry every 500 ms would write two a second), then a line once connected. */
  const expectRetriesLogged = (child: ChildDemo, context: string) => {
    const failed = linesOf(child, context).filter((line) => line.includes('is not reachable'));
    expect(failed.length).toBeGreaterThanOrEqual(1);
    expect(failed.length).toBeLessThanOrEqual(2 + natsDownMs / 1000);
    expect(linesOf(child, context).join('\n')).toMatch(/connected to NATS at nats:\/\/127\.0\.0\.1:\d+ after \d+ failed attempts?/);
  };

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  beforeEach(async () => {
    nats = (await reservePrivateNats())!;
    natsDownSince = Date.now();
  });
  afterEach(async () => {
    for (const child of processes.splice(0)) if (alive(child)) await child.kill();
    await nats?.dispose();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('an instance with the relay and the consumer serves orders while NATS is down and delivers them once it is up', async () => {
    const demo = started(await startDemoProcess(delivery('late')));
    const order = await orderWhileNatsIsDown(demo, 'late-1');
    await deliveredOnceNatsIsUp(order.id);
    expectRetriesLogged(demo, 'JetStreamPublisher');
    expectRetriesLogged(demo, 'JetStreamTransport');
  }, 60_000);

  it('a worker started while NATS is down waits for it, then relays and consumes', async () => {
    const env = delivery('worker');
    // The instance only writes: the worker is the one that must reach NATS.
    const demo = started(await startDemoProcess({ ...env, OUTBOX_RELAY: 'off', FULFILMENT_CONSUMER: 'off' }));
    const worker = started(await startWorkerProcess(env));
    const order = await orderWhileNatsIsDown(demo, 'worker-1');
    await deliveredOnceNatsIsUp(order.id);
    expectRetriesLogged(worker, 'JetStreamPublisher');
    expectRetriesLogged(worker, 'JetStreamTransport');
  }, 60_000);
});
