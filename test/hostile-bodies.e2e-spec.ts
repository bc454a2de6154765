import { request as httpRequest } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { type DemoProcess, startDemoProcess } from './support/demo-process.js';
import { HTTP_ADAPTERS } from './support/http-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

const ACME = 'Bearer demo-key-acme';

/**
 * Bodies no parser of the demo's reads, against the demo as `npm start` runs
 * it: the module reads them up to the demo's own body limit, by their bytes,
 * and a client that stops sending one is no error of the server's.
 */
describe.each(HTTP_ADAPTERS)('bodies the demo’s parsers skip (%s)', (adapter) => {
  let db: TestDatabase;
  let demo: DemoProcess;
  let seq = 0;
  const newKey = () => `bodies-${adapter}-${++seq}-${Date.now()}`;
  const post = (key: string, type: string, body: Buffer) =>
    fetch(`${demo.url}/orders`, { method: 'POST', headers: { authorization: ACME, 'idempotency-key': key, 'content-type': type }, body });
  const recordsOf = (key: string) => db.query(`SELECT status FROM idempotency_records WHERE key = $1`, [key]);

  beforeAll(async () => {
    db = await createTestDatabase();
    demo = await startDemoProcess({ DATABASE_URL: db.url, HTTP_ADAPTER: adapter, TENANT_RATE_LIMIT: '0', PAYMENT_PROVIDER_URL: 'http://127.0.0.1:9', REAPER_INTERVAL_MS: '0' });
  });
  afterAll(async () => {
    await demo?.stop();
    await db?.drop();
  });

  it('refuses a +json body over the demo’s 16 KiB limit at once, and records nothing', async () => {
    const key = newKey();
    const answer = await post(key, 'application/vnd.x+json', Buffer.from(`{"sku":"${'x'.repeat(20_000)}","quantity":1}`));
    // Express's JSON parser skips the type, so the module reads it, to the demo's limit; Fastify has no parser for it.
    expect(answer.status).toBe(adapter === 'express' ? 413 : 415);
    if (adapter === 'express') expect(((await answer.json()) as { type: string }).type).toBe('urn:nest-idempotency:problem:body-too-large');
    expect(await recordsOf(key)).toEqual([]);
  });

  it('logs no error for a client that stops sending a body the module reads', async () => {
    const logged = demo.output().length;
    const { hostname, port } = new URL(demo.url);
    const sent = httpRequest({ hostname, port, method: 'POST', path: '/orders', headers: { authorization: ACME, 'idempotency-key': newKey(), 'content-type': 'application/vnd.x+json', 'content-length': 10_000 } });
    sent.on('error', () => undefined);
    sent.write(Buffer.alloc(100));
    await sleep(200);
    sent.destroy();
    await sleep(300);
    expect((await fetch(`${demo.url}/health`)).status).toBe(200);
    expect(demo.output().slice(logged)).not.toMatch(/ERROR|\n\s+at /);
  });
});
