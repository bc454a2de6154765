import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../src/demo/database/embedded-postgres.js';
import { JetStreamPublisher } from '../src/idempotency/nats/index.js';
import { ACME } from './support/demo.js';
import { type ChildDemo, type DemoProcess, startDemoProcess, startWorkerProcess } from './support/demo-process.js';
import { natsAdmin, uniqueNames } from './support/nats.js';
import { type PrivateNatsCluster, startPrivateNatsCluster } from './support/nats-cluster.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

/**
 * Delivery against a 3-node JetStream cluster on loopback, started from the
 * machine's nats-server: the demo is given every node's URL, the library
 * creates the stream with 3 replicas, and orders ship exactly once while
 * the stream's leader is killed (a worker starting during the election)
 * and another node restarts. Skipped, with a line saying so, without a
 * nats-server binary.
 */
const cluster = await startPrivateNatsCluster(3);
if (!cluster) console.log('skipping the NATS cluster suite: no nats-server on PATH (or at NATS_SERVER_BINARY) to start a cluster');
const describeWithCluster = cluster ? describe : describe.skip;

describeWithCluster('delivery through a NATS cluster', () => {
  const nats = cluster as PrivateNatsCluster;
  let db: TestDatabase;
  let admin: Awaited<ReturnType<typeof natsAdmin>>;
  const processes: ChildDemo[] = [];

  const delivery = (label: string, env: Record<string, string> = {}) => {
    const names = uniqueNames(label);
    return {
      DATABASE_URL: db.url,
      NATS_URL: nats.urls.join(','),
      NATS_STREAM: names.stream,
      NATS_SUBJECT_PREFIX: names.subjectPrefix,
      NATS_DURABLE: names.durable,
      FULFILMENT_ACK_WAIT_MS: '2000',
      REAPER_INTERVAL_MS: '0',
      TENANT_RATE_LIMIT: '0',
      ...env,
    };
  };
  const started = <T extends ChildDemo>(child: T) => (processes.push(child), child);
  const createOrder = async (demo: DemoProcess, key: string) => {
    const response = await fetch(`${demo.url}/orders`, {
      method: 'POST',
      headers: { authorization: ACME, 'idempotency-key': key, 'content-type': 'application/json' },
      body: JSON.stringify({ sku: `sku-${key}`, quantity: 1 }),
    });
    expect(response.status).toBe(201);
    return ((await response.json()) as { id: string }).id;
  };
  const createOrders = (demo: DemoProcess, label: string, count: number) => Promise.all(Array.from({ length: count }, (_, i) => createOrder(demo, `${label}-${i}`)));
  /** Shipments per order, 0 for one not shipped yet. */
  const shipmentsOf = async (orderIds: string[]) => {
    const rows = await db.query<{ order_id: string; n: string }>(`SELECT order_id, count(*) AS n FROM shipments WHERE order_id = ANY($1) GROUP BY order_id`, [orderIds]);
    return orderIds.map((id) => Number(rows.find((row) => row.order_id === id)?.n ?? 0));
  };
  const allShipped = async (orderIds: string[]) => (await shipmentsOf(orderIds)).every((n) => n >= 1);
  const until = async (what: string, check: () => Promise<boolean>, timeoutMs = 20_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
      await sleep(100);
    }
  };
  const alive = (child: ChildDemo) => child.child.exitCode === null && child.child.signalCode === null;

  beforeAll(async () => {
    db = await createTestDatabase();
    admin = await natsAdmin(nats.urls);
  });
  afterEach(async () => {
    for (const child of processes.splice(0)) if (alive(child)) await child.kill();
  });
  afterAll(async () => {
    await admin?.close();
    await nats.dispose();
    await db?.drop();
  });

  it('NATS_URL takes a comma-separated list: the demo ships through its first server while the last one is down', async () => {
    const down = `nats://127.0.0.1:${await freePort()}`;
    const demo = started(await startDemoProcess(delivery('list', { NATS_URL: `${nats.urls[0]},${down}` })));
    const orders = await createOrders(demo, 'list', 1);
    await until('the order is shipped', () => allShipped(orders));
  }, 60_000);

  it('the publisher takes `servers` as a comma-separated string too, and connects through any server in it', async () => {
    const down = `nats://127.0.0.1:${await freePort()}`;
    const names = uniqueNames('servers');
    const publisher = await JetStreamPublisher.connect({ servers: `${nats.urls[0]},${down}`, stream: { name: names.stream, subjects: [`${names.subjectPrefix}.>`] } });
    try {
      await until('the publisher is connected', async () => publisher.connection !== undefined, 10_000);
    } finally {
      await publisher.close();
    }
  });

  it('creates a missing stream with the replicas asked for, one copy on each node', async () => {
    const names = uniqueNames('replicas');
    const publisher = await JetStreamPublisher.connect({ servers: nats.urls, stream: { name: names.stream, subjects: [`${names.subjectPrefix}.>`], replicas: 3 } });
    try {
      await until('the publisher is connected', async () => publisher.connection !== undefined, 10_000);
      const { config, cluster: placement } = await admin.stream(names.stream);
      expect(config.num_replicas).toBe(3);
      expect([placement?.leader, ...(placement?.replicas ?? []).map((replica) => replica.name)].sort()).toEqual(nats.nodes.map((node) => node.name).sort());
    } finally {
      await publisher.close();
    }
  });

  it('ships every order exactly once while the stream leader dies and another node restarts, and no process exits', async () => {
    const env = delivery('failover', { NATS_STREAM_REPLICAS: '3' });
    const demo = started(await startDemoProcess(env));
    const orders = await createOrders(demo, 'before', 3);
    await until('the first orders are shipped', () => allShipped(orders));
    const { config, cluster: placement } = await admin.stream(env.NATS_STREAM);
    expect(config.num_replicas).toBe(3);

    const leader = nats.node(placement!.leader!);
    await leader.kill();
    // Started now, the worker meets the election: its stream and consumer set-up time out until a new leader answers.
    started(await startWorkerProcess(env));
    orders.push(...(await createOrders(demo, 'election', 3)));
    await until('the orders taken during the election are shipped', () => allShipped(orders), 30_000);

    // With two of three nodes down the stream has no quorum: publishes and fetches wait for the restart.
    const second = nats.nodes.find((node) => node !== leader)!;
    await second.kill();
    orders.push(...(await createOrders(demo, 'restart', 3)));
    await sleep(1000);
    await second.start();
    // Within the election plus two missed heartbeats of a pull left at a dead consumer leader (the transport's pulls expire after 10 s).
    await until('every order is shipped', () => allShipped(orders), 30_000);

    await sleep(1000); // a late redelivery would show as a second shipment
    expect(await shipmentsOf(orders)).toEqual(orders.map(() => 1));
    const events = await db.query<{ status: string }>(`SELECT status FROM idempotency_outbox WHERE ordering_key = ANY($1)`, [orders]);
    expect(events.map((event) => event.status)).toEqual(orders.map(() => 'sent'));
    expect(await admin.messages(env.NATS_STREAM)).toBe(orders.length);
    for (const child of processes) expect(alive(child), child.output()).toBe(true);
  }, 90_000);
});
