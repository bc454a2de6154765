import { createServer, type Server, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import request from 'supertest';
import { HaproxyEndpoint, haproxyBinary } from '../harness/haproxy-endpoint.js';
import { freePort } from '../src/demo/database/embedded-postgres.js';
import { ACME } from './support/demo.js';
import { type DemoProcess, startDemoProcess } from './support/demo-process.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

const HAPROXY = haproxyBinary();
if (!HAPROXY) console.log('database-endpoint.e2e-spec: skipped, no haproxy binary (apt-get install haproxy, or set HAPROXY_BINARY)');

/** A server that accepts connections and never says a word: a PostgreSQL that hangs, or a host gone behind a proxy that still accepts. */
async function silentServer(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    port,
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * The demo app reaches PostgreSQL through one endpoint (an HAProxy of the
 * test's own), which the test moves as an HA setup does after a failover:
 * to a server that does not answer, then back. Its connections must die
 * well: a request that cannot get a connection answers 503 with
 * Retry-After within the pool's connect timeout, nothing recorded, and once
 * the endpoint points at a live server again the pool connects there and
 * the retry runs.
 */
describe.skipIf(!HAPROXY)('connections through an endpoint that moves', () => {
  let db: TestDatabase;
  let silent: Awaited<ReturnType<typeof silentServer>>;
  let endpoint: HaproxyEndpoint;
  let demo: DemoProcess;
  const order = (key: string, sku: string) =>
    request(demo.url).post('/orders').set('Authorization', ACME).set('Idempotency-Key', key).send({ sku, quantity: 1 }).timeout(30_000);

  beforeAll(async () => {
    db = await createTestDatabase();
    silent = await silentServer();
    const database = new URL(db.url);
    endpoint = await HaproxyEndpoint.start({ port: await freePort(), servers: { postgres: Number(database.port || 5432), silent: silent.port }, active: 'postgres' });
    demo = await startDemoProcess({ DATABASE_URL: endpoint.url(db.url), TENANT_RATE_LIMIT: '0', REAPER_INTERVAL_MS: '0' });
  }, 90_000);
  afterAll(async () => {
    await demo?.stop();
    await endpoint?.stop();
    await silent?.close();
    await db?.drop();
  });

  it('answers 503 with Retry-After within the connect timeout while the endpoint points at a silent server, records nothing, and runs the retry once it points at PostgreSQL again', async () => {
    const sku = `endpoint-${Date.now()}`;
    const key = `${sku}-key`;
    expect((await order(`${sku}-warm`, `${sku}-warm`)).status).toBe(201);

    await endpoint.repoint('silent');
    // The pool's idle connections were cut with the move: once it has dropped them, the request needs a new one.
    await sleep(1000);
    const startedAt = Date.now();
    const refused = await order(key, sku);
    const waitedMs = Date.now() - startedAt;
    expect(refused.status).toBe(503);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // The demo's connect timeout is 10 s; without one the request would wait for as long as the server stays silent.
    expect(waitedMs).toBeLessThan(20_000);

    await endpoint.repoint('postgres');
    expect(await db.query(`SELECT 1 FROM orders WHERE sku = $1`, [sku])).toEqual([]);
    expect(await db.query(`SELECT 1 FROM idempotency_records WHERE key = $1`, [key])).toEqual([]);
    const retried = await order(key, sku);
    expect(retried.status).toBe(201);
    expect(retried.headers['idempotent-replayed']).toBeUndefined();
    expect(await db.query(`SELECT 1 FROM orders WHERE sku = $1`, [sku])).toHaveLength(1);
  }, 60_000);
});
