import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { AppModule } from '../src/demo/app.module.js';
import { type RunningApp, startApp } from './support/http-app.js';
import { REDIS_URL, redisAnswers } from './support/redis.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

/**
 * The demo's tenant rate limit holds across instances that share Redis: what
 * one tenant sends to either counts against one limit. Skipped, with a line
 * saying so, when no Redis answers.
 */
const redisUp = await redisAnswers();
if (!redisUp) console.log(`skipping the shared rate limit suite: no Redis answers at ${REDIS_URL} (set REDIS_URL to use another)`);

(redisUp ? describe : describe.skip)('the tenant rate limit over two instances sharing Redis', () => {
  const LIMIT = 6;
  // A tenant of this run alone: Redis keeps the counts of other runs for their minute.
  const apiKey = `key-${randomUUID()}`;
  let db: TestDatabase;
  let instances: RunningApp[] = [];
  const send = (i: number) =>
    request(instances[i % 2].url).post('/orders').set('Authorization', `Bearer ${apiKey}`).set('Idempotency-Key', `shared-${i}`).send({ sku: 'shared', quantity: 1 });

  beforeAll(async () => {
    db = await createTestDatabase();
    const options = { databaseUrl: db.url, paymentProviderUrl: 'http://127.0.0.1:9', apiKeys: `${apiKey}:tenant-${randomUUID()}`, tenantRateLimit: LIMIT, redisUrl: REDIS_URL };
    instances = [await startApp({ imports: [AppModule.forRoot(options)] }), await startApp({ imports: [AppModule.forRoot(options)] })];
  });
  afterAll(async () => {
    for (const instance of instances) await instance.close();
    await db?.drop();
  });

  it('refuses the request past the combined limit, though each instance saw fewer', async () => {
    for (let i = 0; i < LIMIT; i++) expect((await send(i)).status).toBe(201);
    for (const i of [LIMIT, LIMIT + 1]) {
      const refused = await send(i);
      expect(refused.status).toBe(429);
      expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    }
    expect((await db.query(`SELECT count(*)::int AS orders FROM orders`))[0]).toEqual({ orders: LIMIT });
  });

  it('reports the shared Redis up in /health', async () => {
    const health = await request(instances[0].url).get('/health');
    expect(health.status).toBe(200);
    expect(health.body).toMatchObject({ status: 'ok', details: { redis: { status: 'up', rateLimit: 'shared' } } });
  });
});
