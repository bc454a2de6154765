import { connect } from 'node:net';
import request from 'supertest';
import { AppModule } from '../src/demo/app.module.js';
import { HTTP_ADAPTERS, startApp, type RunningApp } from './support/http-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

const ACME = 'Bearer demo-key-acme';

/** Sends bytes no HTTP client library would send, and reads the whole answer. */
function rawRequest(url: string, head: Buffer | string, body = '{}'): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    let answer = '';
    socket.on('data', (chunk) => (answer += chunk.toString('latin1')));
    socket.on('end', () => resolve(answer));
    socket.on('error', reject);
    socket.end(Buffer.concat([Buffer.isBuffer(head) ? head : Buffer.from(head, 'latin1'), Buffer.from(`Content-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`)]));
  });
}

describe.each(HTTP_ADAPTERS)('bad input to the demo (%s)', (adapter) => {
  let db: TestDatabase;
  let running: RunningApp;
  const counts = async () => (await db.query(`SELECT (SELECT count(*) FROM idempotency_records) AS records, (SELECT count(*) FROM orders) AS orders`))[0];
  const post = (key: string, body: string, contentType = 'application/json') =>
    request(running.url).post('/orders').set('Authorization', ACME).set('Idempotency-Key', key).set('Content-Type', contentType).send(body);
  const expectProblem = (response: { status: number; headers: Record<string, string>; body: { status?: number } }, status: number) => {
    expect(response.status).toBe(status);
    expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(response.body.status).toBe(status);
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    running = await startApp({ imports: [AppModule.forRoot({ databaseUrl: db.url, paymentProviderUrl: 'http://127.0.0.1:9', tenantRateLimit: 0 })] }, { adapter });
  });
  afterAll(async () => {
    await running?.close();
    await db?.drop();
  });

  it('refuses bodies over the 16 KiB limit with 413, and stores nothing', async () => {
    const before = await counts();
    const response = await post('big-body', JSON.stringify({ sku: 'big', quantity: 1, note: 'x'.repeat(17 * 1024) }));
    expectProblem(response, 413);
    expect(await counts()).toEqual(before);
  });

  it.each([
    ['malformed JSON', '{"sku": "a", ', 400],
    ['an array', '[{"sku":"a","quantity":1}]', 400],
    ['a bare string', '"order"', 400],
    ['a number', '42', 400],
  ])('refuses %s with a 4xx problem, and stores nothing', async (_case, body, status) => {
    const before = await counts();
    expectProblem(await post(`body-${_case}`, body), status);
    expect(await counts()).toEqual(before);
  });

  it.each([
    ['2,500 levels of arrays', `{"sku":"deep","quantity":1,"note":${'['.repeat(2500)}${']'.repeat(2500)}}`],
    ['8,000 levels of arrays', `${'['.repeat(8000)}${']'.repeat(8000)}`],
    ['2,500 levels of objects', `{"sku":"deep","quantity":1,"note":${'{"a":'.repeat(2500)}1${'}'.repeat(2500)}}`],
    ['33 levels, one past the limit', `{"sku":"deep","quantity":1,"note":${'['.repeat(32)}${']'.repeat(32)}}`],
  ])('refuses a body nested %s deep with 400, and stores nothing', async (_case, body) => {
    const before = await counts();
    const response = await post(`deep-${_case.replace(/\W+/g, '-')}`, body);
    expectProblem(response, 400);
    expect(response.body.detail).toMatch(/nest/);
    expect(await counts()).toEqual(before);
  });

  it.each([
    ['a NUL in sku', { sku: 'book\u0000', quantity: 1 }],
    ['a NUL in note', { sku: 'book', quantity: 1, note: 'gift\u0000wrap' }],
    ['a NUL in a property name', { sku: 'book', quantity: 1, 'n\u0000ote': 'x' }],
    ['an unpaired surrogate in note', { sku: 'book', quantity: 1, note: 'a\ud800b' }],
  ])('refuses %s, which PostgreSQL cannot store, with 400, and stores nothing', async (_case, body) => {
    const before = await counts();
    expectProblem(await post(`unstorable-${_case.replace(/\W+/g, '-')}`, JSON.stringify(body)), 400);
    expect(await counts()).toEqual(before);
  });

  it('lets 32 levels of nesting, and control characters PostgreSQL stores, through to validation', async () => {
    const nested = await post('deep-32', `{"sku":"deep","quantity":1,"note":${'['.repeat(31)}${']'.repeat(31)}}`);
    expectProblem(nested, 400);
    expect(nested.body.detail).toMatch(/note must be a string/);
    const controls = await post('controls', JSON.stringify({ sku: 'tab\there', quantity: 0, note: 'bell\u0007, escape\u001b' }));
    expectProblem(controls, 400);
    expect(controls.body.detail).toBe('quantity must not be less than 1');
  });

  it.each(['text/plain', 'application/x-www-form-urlencoded', 'application/xml'])('refuses a %s body with 415, and stores nothing', async (type) => {
    const before = await counts();
    expectProblem(await post(`type-${type}`, 'sku=a&quantity=1', type), 415);
    expect(await counts()).toEqual(before);
  });

  it('answers a header with a control character, which Node refuses to parse, with a problem', async () => {
    const answer = await rawRequest(running.url, `POST /orders HTTP/1.1\r\nHost: x\r\nAuthorization: ${ACME}\r\nIdempotency-Key: a\u0001b\r\nContent-Type: application/json\r\n`);
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toContain('application/problem+json');
  });

  it('refuses a key with non-ASCII bytes', async () => {
    const before = await counts();
    const head = Buffer.concat([Buffer.from(`POST /orders HTTP/1.1\r\nHost: x\r\nAuthorization: ${ACME}\r\nIdempotency-Key: caf`), Buffer.from([0xe9]), Buffer.from('\r\nContent-Type: application/json\r\n')]);
    const answer = await rawRequest(running.url, head, '{"sku":"latin","quantity":1}');
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toContain('urn:nest-idempotency:problem:key-malformed');
    expect(await counts()).toEqual(before);
  });

  it('refuses a key of 256 characters or more', async () => {
    expectProblem(await post('k'.repeat(256), '{"sku":"long","quantity":1}'), 400);
    expectProblem(await post('k'.repeat(10_000), '{"sku":"long","quantity":1}'), 400);
  });

  it('treats SQL-looking keys as opaque text', async () => {
    const key = `1'OR'1'='1;--`;
    const first = await post(key, '{"sku":"sql","quantity":1}');
    expect(first.status).toBe(201);
    const replay = await post(key, '{"sku":"sql","quantity":1}');
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expectProblem(await post(`'; DROP TABLE orders; --`, '{"sku":"sql","quantity":1}'), 400);
    expect(await db.query(`SELECT key FROM idempotency_records WHERE key = $1`, [key])).toEqual([{ key }]);
    expect((await counts()).orders).toBe('1');
  });

  it('stays healthy after all of it', async () => {
    expect((await request(running.url).get('/health')).status).toBe(200);
  });

  it('caps the requests of one tenant, so it cannot flood the table with keys', async () => {
    const limited = await startApp({ imports: [AppModule.forRoot({ databaseUrl: db.url, paymentProviderUrl: 'http://127.0.0.1:9', tenantRateLimit: 5 })] }, { adapter });
    try {
      const before = await counts();
      const send = (i: number) => request(limited.url).post('/orders').set('Authorization', ACME).set('Idempotency-Key', `flood-${i}`).send({ sku: 'flood', quantity: 1 });
      for (let i = 0; i < 5; i++) expect((await send(i)).status).toBe(201);
      const refused = await send(5);
      expectProblem(refused, 429);
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
      expect(Number((await counts()).records)).toBe(Number(before.records) + 5);
      const otherTenant = await request(limited.url).post('/orders').set('Authorization', 'Bearer demo-key-globex').set('Idempotency-Key', 'flood-x').send({ sku: 'flood', quantity: 1 });
      expect(otherTenant.status).toBe(201);
    } finally {
      await limited.close();
    }
  });
});
