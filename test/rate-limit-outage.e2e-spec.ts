import { performance } from 'node:perf_hooks';
import { freePort } from '../src/demo/database/embedded-postgres.js';
import { ACME } from './support/demo.js';
import { type DemoProcess, startDemoProcess } from './support/demo-process.js';
import { REDIS_URL, redisAnswers, silentRedis } from './support/redis.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

/**
 * The demo's tenant rate limit with its Redis out: every request answers at
 * once with its usual status, the tenant counted by the instance alone, and
 * /health reports Redis without failing. Before, each request waited on
 * ioredis's retries and answered 500, or hung where Redis never answered.
 */
const LIMIT = 12;
/** Well above a request's time here, well below the seconds ioredis's retries took. */
const QUICK_MS = 3000;

interface Outage {
  url: string;
  /** Called once the demo has started, for an outage that begins after Redis answered. */
  begin?(): void;
  close?(): Promise<void>;
}

const redisUp = await redisAnswers();
if (!redisUp) console.log(`skipping the outage of a Redis that answered: no Redis answers at ${REDIS_URL} (set REDIS_URL to use another)`);

const outages: [string, boolean, () => Promise<Outage>][] = [
  ['refuses connections', true, async () => ({ url: `redis://127.0.0.1:${await freePort()}` })],
  ['accepts connections and never answers', true, () => silentRedis()],
  ['stops answering once the demo is connected', redisUp, async () => {
    const redis = await silentRedis(REDIS_URL);
    return { ...redis, begin: redis.freeze };
  }],
];

describe.each(outages.filter(([, runs]) => runs))('the demo with a Redis that %s', (_, __, outageOf) => {
  let db: TestDatabase;
  let outage: Outage;
  let demo: DemoProcess;
  const timed = async (path: string, init: RequestInit = {}) => {
    const start = performance.now();
    const response = await fetch(`${demo.url}${path}`, { ...init, signal: AbortSignal.timeout(10_000) });
    const body = await response.text();
    return { status: response.status, headers: response.headers, body, ms: performance.now() - start };
  };
  const createOrder = () =>
    timed('/orders', {
      method: 'POST',
      headers: { authorization: ACME, 'idempotency-key': 'outage-order', 'content-type': 'application/json' },
      body: JSON.stringify({ sku: 'outage', quantity: 1 }),
    });
  const listOrders = () => timed('/orders', { headers: { authorization: ACME } });

  beforeAll(async () => {
    db = await createTestDatabase();
    outage = await outageOf();
    demo = await startDemoProcess({ DATABASE_URL: db.url, REDIS_URL: outage.url, TENANT_RATE_LIMIT: String(LIMIT), REAPER_INTERVAL_MS: '0' });
    outage.begin?.();
  });
  afterAll(async () => {
    await demo?.stop();
    await outage?.close?.();
    await db?.drop();
  });

  it('answers at once, a replay from the cache too, and still limits the tenant per instance', async () => {
    const first = await createOrder();
    expect(first.status).toBe(201);
    expect(first.ms).toBeLessThan(QUICK_MS);
    const replay = await createOrder();
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.ms).toBeLessThan(QUICK_MS);

    const start = performance.now();
    for (let i = 2; i < LIMIT; i++) expect((await listOrders()).status).toBe(200);
    expect(performance.now() - start).toBeLessThan(QUICK_MS);
    const refused = await listOrders();
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  it('reports Redis in /health as degraded, not down: the instance stays in rotation', async () => {
    const health = await timed('/health');
    expect(health.status).toBe(200);
    expect(health.ms).toBeLessThan(QUICK_MS);
    expect(JSON.parse(health.body)).toMatchObject({ status: 'degraded', details: { redis: { status: 'degraded', rateLimit: 'per instance' } } });
  });
});
