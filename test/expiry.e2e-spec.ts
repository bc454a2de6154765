import request from 'supertest';
import { IdempotencyReaper } from '../src/idempotency/index.js';
import { HTTP_ADAPTERS, startApp, type RunningApp } from './support/http-app.js';
import { LEDGER_SCHEMA, Ledger, ledgerAppModules } from './support/ledger-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Only `Date` is moved, and it keeps ticking, as on a host whose clock is off; every timer API stays real. */
const skewProcessClock = (skewMs: number) => vi.useFakeTimers({ now: Date.now() + skewMs, shouldAdvanceTime: true, toFake: ['Date'] });

describe.each(HTTP_ADAPTERS)('expired keys (%s)', (adapter) => {
  let db: TestDatabase;
  let keySeq = 0;
  const newKey = () => `expiry-${adapter}-${++keySeq}-${Date.now()}`;
  const send = (app: RunningApp, key: string, label: string) =>
    Promise.resolve(request(app.url).post('/entries').set('Idempotency-Key', key).set('X-Tenant', 'acme').send({ label }));
  /** Ages a record past its retention, as the database's clock would. */
  const expire = (key: string) => db.query(`UPDATE idempotency_records SET expires_at = now() - interval '1 second' WHERE key = $1`, [key]);
  const entriesAfter = async (entry: number) => (await db.query<{ id: string }>(`SELECT id FROM ledger_entries WHERE id > $1 ORDER BY id`, [entry])).map((row) => Number(row.id));

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(LEDGER_SCHEMA);
  });
  afterAll(async () => db?.drop());

  describe('a storm of retries on an expired key, over two instances', () => {
    let instances: RunningApp[];

    beforeAll(async () => {
      // No replay cache and no reaper: these tests age records behind the module's back.
      instances = [];
      for (let i = 0; i < 2; i++) instances.push(await startApp({ imports: ledgerAppModules(db.url, { replayCacheSize: 0, reaper: false }) }, { adapter }));
    });
    afterAll(async () => Promise.all((instances ?? []).map((instance) => instance.close())));

    /** Completes the key with `originalLabel`, expires it, then sends 20 requests with `stormLabel` at once, alternating instances. */
    async function storm(originalLabel: string, stormLabel: string) {
      const key = newKey();
      const original = await send(instances[0], key, originalLabel);
      expect(original.status).toBe(201);
      await expire(key);
      // Whichever request takes the record over holds its row a while, so the others wait on it.
      for (const instance of instances) instance.app.get(Ledger).script.push({ delayMs: 300 });
      const responses = await Promise.all(Array.from({ length: 20 }, (_, i) => send(instances[i % 2], key, stormLabel)));
      for (const instance of instances) instance.app.get(Ledger).script.length = 0;
      const created = await entriesAfter(original.body.entry);
      return { original, responses, created };
    }

    function expectOneNewExecution({ original, responses, created }: Awaited<ReturnType<typeof storm>>) {
      expect(created).toHaveLength(1);
      const [entry] = created;
      expect(entry).not.toBe(original.body.entry);
      expect(responses.map((response) => response.status).filter((status) => status !== 201 && status !== 409)).toEqual([]);
      const successes = responses.filter((response) => response.status === 201);
      expect(successes.length).toBeGreaterThan(0);
      expect(successes.map((response) => response.body.entry)).toEqual(successes.map(() => entry));
      expect(successes.filter((response) => response.headers['idempotent-replayed'] === undefined)).toHaveLength(1);
      for (const response of responses.filter((response) => response.status === 409)) expect(response.headers['retry-after']).toBeDefined();
    }

    it('runs identical requests once, and every 201 names the new execution', async () => {
      expectOneNewExecution(await storm('storm-same', 'storm-same'));
    });

    it('runs once when the new request differs from the expired record’s, with no 422', async () => {
      expectOneNewExecution(await storm('storm-old-body', 'storm-new-body'));
    });
  });

  describe('an instance whose process clock is off by an hour', () => {
    afterEach(() => vi.useRealTimers());

    it('deletes no live record when its clock runs ahead, so a retry replays', async () => {
      skewProcessClock(+3_600_000);
      const instance = await startApp({ imports: ledgerAppModules(db.url, { retention: 30 * 60_000, reaper: { intervalMs: 3_600_000 } }) }, { adapter });
      try {
        const key = newKey();
        const first = await send(instance, key, 'clock-ahead');
        expect(first.status).toBe(201);
        await instance.app.get(IdempotencyReaper).reap();
        expect(await db.query(`SELECT status FROM idempotency_records WHERE key = $1`, [key])).toEqual([{ status: 'completed' }]);
        const retry = await send(instance, key, 'clock-ahead');
        expect(retry.headers['idempotent-replayed']).toBe('true');
        expect(retry.text).toBe(first.text);
        expect(await entriesAfter(first.body.entry - 1)).toEqual([first.body.entry]);
      } finally {
        await instance.close();
      }
    });

    it('replays no expired record from its cache when its clock runs behind', async () => {
      skewProcessClock(-3_600_000);
      // Retention just over the cache's 5 s margin: the outcome is cached for a moment only.
      const instance = await startApp({ imports: ledgerAppModules(db.url, { retention: 5_100, reaper: false }) }, { adapter });
      try {
        const key = newKey();
        const first = await send(instance, key, 'clock-behind');
        expect(first.status).toBe(201);
        await sleep(300);
        await expire(key);
        const after = await send(instance, key, 'clock-behind');
        expect(after.status).toBe(201);
        expect(after.headers['idempotent-replayed']).toBeUndefined();
        expect(after.body.entry).not.toBe(first.body.entry);
      } finally {
        await instance.close();
      }
    });
  });
});
