import request from 'supertest';
import { DataSource } from 'typeorm';
import { AppModule } from '../src/demo/app.module.js';
import { HTTP_ADAPTERS, startApp, type RunningApp } from './support/http-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

const ACME = 'Bearer demo-key-acme';
const GLOBEX = 'Bearer demo-key-globex';
/** These tests take no payments. */
const UNUSED_PROVIDER = 'http://127.0.0.1:9';

describe.each(HTTP_ADAPTERS)('demo orders app (%s)', (adapter) => {
  let db: TestDatabase;
  let running: RunningApp;
  let keySeq = 0;
  const newKey = () => `order-key-${++keySeq}-${Date.now()}`;

  const createOrder = (key: string | undefined, body: object | string, auth = ACME) => {
    const req = request(running.url).post('/orders').set('Authorization', auth).set('Content-Type', 'application/json');
    if (key !== undefined) req.set('Idempotency-Key', key);
    return req.send(typeof body === 'string' ? body : JSON.stringify(body));
  };
  const ordersWith = async (sku: string) => (await db.query<{ n: string }>(`SELECT count(*) AS n FROM orders WHERE sku = $1`, [sku]))[0].n;
  const executionsOf = async (sku: string) => (await db.query<{ n: string }>(`SELECT count(*) AS n FROM order_executions WHERE sku = $1`, [sku]))[0].n;
  const recordsFor = async (key: string) => (await db.query(`SELECT * FROM idempotency_records WHERE key = $1`, [key])).length;

  beforeAll(async () => {
    db = await createTestDatabase();
    running = await startApp({ imports: [AppModule.forRoot({ databaseUrl: db.url, paymentProviderUrl: UNUSED_PROVIDER })] }, { adapter });
  });
  afterAll(async () => {
    await running?.close();
    await db?.drop();
  });

  it('creates an order with its Location, and replays it byte for byte', async () => {
    const key = newKey();
    const first = await createOrder(key, { sku: 'replay-1', quantity: 2, note: 'gift' });
    expect(first.status).toBe(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    expect(first.body).toMatchObject({ tenant: 'acme', sku: 'replay-1', quantity: 2, note: 'gift', status: 'created' });
    expect(first.headers.location).toBe(`/orders/${first.body.id}`);

    const replay = await createOrder(key, { sku: 'replay-1', quantity: 2, note: 'gift' });
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(first.text);
    expect(replay.headers.location).toBe(first.headers.location);
    expect(replay.headers['content-type']).toBe(first.headers['content-type']);
    expect(await ordersWith('replay-1')).toBe('1');
  });

  it('writes the order and its outbox event in one transaction', async () => {
    const key = newKey();
    const created = await createOrder(key, { sku: 'outbox-1', quantity: 1 });
    const events = await db.query<{ type: string; payload: { id: string } }>(`SELECT type, payload FROM idempotency_outbox WHERE ordering_key = $1`, [created.body.id]);
    expect(events).toEqual([{ type: 'order.created', payload: expect.objectContaining({ id: created.body.id, sku: 'outbox-1' }) }]);
  });

  it('commits the order and its outbox row together or not at all, and releases the key', async () => {
    await db.query(`
      CREATE FUNCTION refuse_doomed_event() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.payload->>'sku' = 'doomed' THEN RAISE EXCEPTION 'outbox refused'; END IF; RETURN NEW; END $$`);
    await db.query(`CREATE TRIGGER refuse_doomed BEFORE INSERT ON idempotency_outbox FOR EACH ROW EXECUTE FUNCTION refuse_doomed_event()`);
    const key = newKey();
    const failed = await createOrder(key, { sku: 'doomed', quantity: 1 });
    expect(failed.status).toBe(500);
    expect(await ordersWith('doomed')).toBe('0');
    expect(await recordsFor(key)).toBe(0);

    await db.query(`DROP TRIGGER refuse_doomed ON idempotency_outbox`);
    const retried = await createOrder(key, { sku: 'doomed', quantity: 1 });
    expect(retried.status).toBe(201);
    expect(retried.headers['idempotent-replayed']).toBeUndefined();
    expect(await ordersWith('doomed')).toBe('1');
    expect(await db.query(`SELECT 1 FROM idempotency_outbox WHERE ordering_key = $1`, [retried.body.id])).toHaveLength(1);
    // The audit keeps the run that rolled back as well as the one that committed.
    expect(await executionsOf('doomed')).toBe('2');
  });

  it('creates exactly one order from concurrent identical requests', async () => {
    const key = newKey();
    const responses = await Promise.all(Array.from({ length: 12 }, () => createOrder(key, { sku: 'burst-1', quantity: 5 })));
    const created = responses.filter((r) => r.status === 201);
    const conflicts = responses.filter((r) => r.status === 409);
    expect(created.length + conflicts.length).toBe(responses.length);
    expect(created.length).toBeGreaterThan(0);
    expect(new Set(created.map((r) => r.text)).size).toBe(1);
    expect(created.filter((r) => r.headers['idempotent-replayed'] === undefined)).toHaveLength(1);
    for (const conflict of conflicts) expect(Number(conflict.headers['retry-after'])).toBeGreaterThan(0);
    expect(await ordersWith('burst-1')).toBe('1');
    expect(await executionsOf('burst-1')).toBe('1');
  });

  it('replays a retry whose JSON has reordered keys and other whitespace', async () => {
    const key = newKey();
    const first = await createOrder(key, '{"sku":"reorder-1","quantity":3,"note":"n"}');
    const retry = await createOrder(key, '{ "note" : "n",\n  "quantity": 3.0, "sku": "reorder-1" }');
    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.text).toBe(first.text);
    expect(await ordersWith('reorder-1')).toBe('1');
  });

  it('answers 422 to the key reused with a different body', async () => {
    const key = newKey();
    await createOrder(key, { sku: 'reuse-1', quantity: 1 });
    const reused = await createOrder(key, { sku: 'reuse-1', quantity: 2 });
    expect(reused.status).toBe(422);
    expect(reused.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(reused.body).toMatchObject({ type: 'urn:nest-idempotency:problem:key-reused', status: 422 });
    expect(await ordersWith('reuse-1')).toBe('1');
  });

  it('scopes keys by tenant: the same key under another tenant is another operation', async () => {
    const key = newKey();
    const acme = await createOrder(key, { sku: 'tenant-1', quantity: 1 }, ACME);
    const globex = await createOrder(key, { sku: 'tenant-1', quantity: 1 }, GLOBEX);
    expect(acme.status).toBe(201);
    expect(globex.status).toBe(201);
    expect(globex.headers['idempotent-replayed']).toBeUndefined();
    expect(globex.body.tenant).toBe('globex');
    expect(globex.body.id).not.toBe(acme.body.id);
  });

  it('does not consume the key on a validation failure', async () => {
    const key = newKey();
    const invalid = await createOrder(key, { sku: 'valid-1', quantity: 0 });
    expect(invalid.status).toBe(400);
    const unknownField = await createOrder(key, { sku: 'valid-1', quantity: 1, price: 5 });
    expect(unknownField.status).toBe(400);
    expect(await recordsFor(key)).toBe(0);
    const valid = await createOrder(key, { sku: 'valid-1', quantity: 1 });
    expect(valid.status).toBe(201);
    expect(await ordersWith('valid-1')).toBe('1');
  });

  it('takes over an expired record', async () => {
    const key = newKey();
    const first = await createOrder(key, { sku: 'expired-1', quantity: 1 });
    await db.query(`UPDATE idempotency_records SET expires_at = now() - interval '1 second' WHERE key = $1`, [key]);
    // Another instance: this one's replay cache still holds the outcome the test aged behind its back.
    const other = await startApp({ imports: [AppModule.forRoot({ databaseUrl: db.url, paymentProviderUrl: UNUSED_PROVIDER })] }, { adapter });
    try {
      const again = await request(other.url).post('/orders').set('Authorization', ACME).set('Idempotency-Key', key).send({ sku: 'expired-1', quantity: 1 });
      expect(again.status).toBe(201);
      expect(again.headers['idempotent-replayed']).toBeUndefined();
      expect(again.body.id).not.toBe(first.body.id);
    } finally {
      await other.close();
    }
    expect(await ordersWith('expired-1')).toBe('2');
    expect(await recordsFor(key)).toBe(1);
  });

  it('keeps orders with equal bodies and different keys apart', async () => {
    await createOrder(newKey(), { sku: 'twin', quantity: 1 });
    await createOrder(newKey(), { sku: 'twin', quantity: 1 });
    expect(await ordersWith('twin')).toBe('2');
  });

  describe('key header', () => {
    it('answers 400 to a missing key and stores nothing', async () => {
      const response = await createOrder(undefined, { sku: 'nokey', quantity: 1 });
      expect(response.status).toBe(400);
      expect(response.body).toMatchObject({ type: 'urn:nest-idempotency:problem:key-missing' });
      expect(await ordersWith('nokey')).toBe('0');
    });

    it.each([
      ['too long', 'k'.repeat(256)],
      ['empty', ''],
      ['an empty quoted string', '""'],
      ['an inner space', 'two words'],
    ])('answers 400 to a key that is %s and stores nothing', async (_case, key) => {
      const before = await db.query(`SELECT count(*) AS n FROM idempotency_records`);
      const response = await createOrder(key, { sku: 'badkey', quantity: 1 });
      expect(response.status).toBe(400);
      expect(response.body).toMatchObject({ type: 'urn:nest-idempotency:problem:key-malformed', status: 400 });
      expect(await db.query(`SELECT count(*) AS n FROM idempotency_records`)).toEqual(before);
      expect(await ordersWith('badkey')).toBe('0');
    });

    it('answers 400 to a repeated key header', async () => {
      const response = await request(running.url)
        .post('/orders')
        .set('Authorization', ACME)
        // Node sends an array value as one header line per entry.
        .set('Idempotency-Key', ['a-key', 'b-key'] as unknown as string)
        .send({ sku: 'twokeys', quantity: 1 });
      expect(response.status).toBe(400);
      expect(response.body.type).toBe('urn:nest-idempotency:problem:key-malformed');
      expect(await ordersWith('twokeys')).toBe('0');
    });

    it('accepts an RFC 8941 quoted key as the same key as its bare form', async () => {
      const key = newKey();
      const first = await createOrder(`"${key}"`, { sku: 'quoted-1', quantity: 1 });
      const bare = await createOrder(key, { sku: 'quoted-1', quantity: 1 });
      expect(bare.headers['idempotent-replayed']).toBe('true');
      expect(bare.text).toBe(first.text);
    });
  });

  describe('reads and auth', () => {
    it('answers 401 without a known API key', async () => {
      expect((await request(running.url).get('/orders')).status).toBe(401);
      expect((await request(running.url).get('/orders').set('Authorization', 'Bearer nope')).status).toBe(401);
      expect((await createOrder(newKey(), { sku: 'anon', quantity: 1 }, 'Bearer nope')).status).toBe(401);
    });

    it('hides another tenant’s order', async () => {
      const created = await createOrder(newKey(), { sku: 'private-1', quantity: 1 });
      expect((await request(running.url).get(`/orders/${created.body.id}`).set('Authorization', ACME)).body).toEqual({ ...created.body, shipment: null });
      expect((await request(running.url).get(`/orders/${created.body.id}`).set('Authorization', GLOBEX)).status).toBe(404);
    });

    it('pages through the tenant’s orders, newest first', async () => {
      const auth = 'Bearer page-key';
      const paged = await startApp({ imports: [AppModule.forRoot({ databaseUrl: db.url, apiKeys: 'page-key:pager', paymentProviderUrl: UNUSED_PROVIDER })] }, { adapter });
      try {
        const ids: string[] = [];
        for (let i = 0; i < 5; i++) {
          const created = await request(paged.url).post('/orders').set('Authorization', auth).set('Idempotency-Key', newKey()).send({ sku: `page-${i}`, quantity: 1 });
          ids.unshift(created.body.id);
        }
        const seen: string[] = [];
        let cursor: string | null = null;
        do {
          const page: request.Response = await request(paged.url).get('/orders').query({ limit: 2, ...(cursor ? { cursor } : {}) }).set('Authorization', auth);
          expect(page.status).toBe(200);
          seen.push(...page.body.items.map((order: { id: string }) => order.id));
          cursor = page.body.nextCursor;
        } while (cursor);
        expect(seen).toEqual(ids);
      } finally {
        await paged.close();
      }
    });

    it('reports health without credentials: the database, and the outbox relay off without delivery', async () => {
      const health = await request(running.url).get('/health');
      expect(health.status).toBe(200);
      expect(health.body).toMatchObject({ status: 'ok', details: { database: { status: 'up' }, outbox: { status: 'up', relay: 'off' } } });
    });

    it('answers 503 naming the database when it is down', async () => {
      const isolated = await startApp({ imports: [AppModule.forRoot({ databaseUrl: db.url, paymentProviderUrl: UNUSED_PROVIDER, idempotency: { reaper: false } })] }, { adapter });
      try {
        await isolated.app.get(DataSource).destroy();
        const health = await request(isolated.url).get('/health');
        expect(health.status).toBe(503);
        expect(health.body).toMatchObject({ status: 'error', error: { database: { status: 'down' } } });
      } finally {
        await isolated.close();
      }
    });
  });
});
