import { type DemoProcess, startDemoProcess } from './support/demo-process.js';
import { HTTP_ADAPTERS } from './support/http-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

/** The compiled demo, as `npm start` runs it, on each adapter. */
describe.each(HTTP_ADAPTERS)('the demo process (%s)', (adapter) => {
  let db: TestDatabase;
  let demo: DemoProcess;

  beforeAll(async () => {
    db = await createTestDatabase();
    demo = await startDemoProcess({ DATABASE_URL: db.url, HTTP_ADAPTER: adapter, REAPER_INTERVAL_MS: '0' });
  });
  afterAll(async () => {
    await demo?.stop();
    await db?.drop();
  });

  it('serves orders with replays, OpenAPI and metrics', async () => {
    const create = () =>
      fetch(`${demo.url}/orders`, {
        method: 'POST',
        headers: { authorization: 'Bearer demo-key-acme', 'idempotency-key': `demo-${adapter}`, 'content-type': 'application/json' },
        body: JSON.stringify({ sku: 'demo', quantity: 1 }),
      });
    const first = await create();
    const replay = await create();
    expect([first.status, replay.status]).toEqual([201, 201]);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(await replay.text()).toBe(await first.text());

    expect(await (await fetch(`${demo.url}/docs`)).text()).toContain('swagger-ui');
    const document = (await (await fetch(`${demo.url}/docs-json`)).json()) as { paths: Record<string, { post: { parameters: unknown[] } }> };
    expect(document.paths['/orders'].post.parameters).toContainEqual(expect.objectContaining({ name: 'Idempotency-Key', in: 'header' }));
    const metrics = await (await fetch(`${demo.url}/metrics`)).text();
    expect(metrics).toContain('idempotency_replays_total{operation="POST /orders",path="immediate"} 1');
  });
});
