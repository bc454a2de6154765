import pg from 'pg';
import request from 'supertest';
import { setTimeout as sleep } from 'node:timers/promises';
import { ScheduleModule, SchedulerRegistry } from '@nestjs/schedule';
import { IDEMPOTENCY_REAPER_INTERVAL, IdempotencyReaper } from '../src/idempotency/index.js';
import { AbandonedClaimsCompleter } from '../src/idempotency/phases/index.js';
import { HTTP_ADAPTERS, startApp, type RunningApp } from './support/http-app.js';
import { LEDGER_SCHEMA, ledgerAppModules, NotifyGate } from './support/ledger-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

/** Inserts `count` records under `prefix` with generate_series: completed unless said otherwise. */
async function seed(db: TestDatabase, prefix: string, count: number, expiresAt: string, extra = `'completed', 201`) {
  await db.query(
    `INSERT INTO idempotency_records (scope, operation, key, fingerprint, status, response_status, expires_at, lease_expires_at)
     SELECT 'tenant:seed', 'POST /seed', $1 || n, 'f', ${extra}, ${expiresAt}, now() + interval '1 minute' FROM generate_series(1, $2) AS n`,
    [prefix, count],
  );
}
/** Inserts `count` phased claims whose owner died after their operation started: the completer's to resume. */
async function seedAbandoned(db: TestDatabase, prefix: string, count: number) {
  const resume = { operation: 'ledger-transfer', input: { label: prefix }, status: 201, storeErrors: [] };
  await db.query(
    `INSERT INTO idempotency_records (scope, operation, key, fingerprint, status, expires_at, owner_token, lease_expires_at, resume)
     SELECT 'tenant:acme', 'POST /entries/transfers', $1 || n, 'f', 'in_progress', now() + interval '1 day', gen_random_uuid(), now() - interval '1 second', $3
       FROM generate_series(1, $2) AS n`,
    [prefix, count, JSON.stringify(resume)],
  );
}
const countOf = async (db: TestDatabase, prefix: string) =>
  Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM idempotency_records WHERE key LIKE $1 || '%'`, [prefix]))[0].n);

describe.each(HTTP_ADAPTERS)('IdempotencyReaper (%s)', (adapter) => {
  let db: TestDatabase;
  let running: RunningApp;
  let reaper: IdempotencyReaper;

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(LEDGER_SCHEMA);
    // No replay cache: these tests age records in the database, behind the cache's back.
    running = await startApp({ imports: ledgerAppModules(db.url, { reaper: { batchSize: 100, intervalMs: 3_600_000 }, replayCacheSize: 0 }) }, { adapter });
    reaper = running.app.get(IdempotencyReaper);
  });
  afterAll(async () => {
    await running?.close();
    await db?.drop();
  });

  it('deletes expired records in batches, and keeps live ones and in-progress claims', async () => {
    await seed(db, 'old-', 250, `now() - interval '1 hour'`);
    await seed(db, 'fresh-', 5, `now() + interval '1 hour'`);
    await seed(db, 'claimed-', 3, `now() - interval '1 hour'`, `'in_progress', NULL`);
    const result = await reaper.reap(new Date());
    expect(result).toMatchObject({ deleted: 250, batches: 3, skipped: false });
    expect(await countOf(db, 'old-')).toBe(0);
    expect(await countOf(db, 'fresh-')).toBe(5);
    expect(await countOf(db, 'claimed-')).toBe(3);
  });

  it('takes the time to compare against as an argument', async () => {
    await seed(db, 'later-', 10, `now() + interval '1 hour'`);
    expect((await reaper.reap(new Date())).deleted).toBe(0);
    expect((await reaper.reap(new Date(Date.now() + 2 * 3600_000))).deleted).toBeGreaterThanOrEqual(10);
    expect(await countOf(db, 'later-')).toBe(0);
  });

  it('skips a record a live claim holds locked, and reaps it once released', async () => {
    await seed(db, 'locked-', 3, `now() - interval '1 hour'`);
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM idempotency_records WHERE key = 'locked-1' FOR UPDATE`);
      expect((await reaper.reap(new Date())).deleted).toBe(2);
      expect(await countOf(db, 'locked-')).toBe(1);
      await holder.query('COMMIT');
      expect((await reaper.reap(new Date())).deleted).toBe(1);
    } finally {
      await holder.end();
    }
  });

  it('frees the key after expiry: the same key starts a new operation', async () => {
    const send = () => request(running.url).post('/entries').set('Idempotency-Key', 'retained').set('X-Tenant', 'acme').send({ label: 'retained' });
    const first = await send();
    expect((await send()).headers['idempotent-replayed']).toBe('true');
    await db.query(`UPDATE idempotency_records SET expires_at = now() - interval '1 second' WHERE key = 'retained'`);
    expect((await reaper.reap(new Date())).deleted).toBe(1);
    const again = await send();
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    expect(again.body.entry).not.toBe(first.body.entry);
  });

  it('lets only one of several instances reap at a time, and together they delete each record once', async () => {
    await seed(db, 'shared-', 3000, `now() - interval '1 hour'`);
    const other = await startApp({ imports: ledgerAppModules(db.url, { reaper: { batchSize: 100, intervalMs: 3_600_000 } }) }, { adapter });
    try {
      const results = await Promise.all([reaper, other.app.get(IdempotencyReaper)].map((instance) => instance.reap(new Date())));
      const leftover = await reaper.reap(new Date());
      expect(results[0].deleted + results[1].deleted + leftover.deleted).toBe(3000);
      expect(await countOf(db, 'shared-')).toBe(0);
    } finally {
      await other.close();
    }
  });

  it('deletes expired records in a scheduled pass even when finishing abandoned claims fails', async () => {
    const broken = await startApp(
      { imports: ledgerAppModules(db.url, { reaper: { intervalMs: 3_600_000 } }) },
      {
        adapter,
        adjust: (builder) =>
          builder.overrideProvider(AbandonedClaimsCompleter).useValue({ completeAbandoned: () => Promise.reject(new Error('completer down')) }),
      },
    );
    try {
      await seed(db, 'despite-', 20, `now() - interval '1 hour'`);
      await broken.app.get(IdempotencyReaper).runPass();
      expect(await countOf(db, 'despite-')).toBe(0);
    } finally {
      await broken.close();
    }
  });

  describe('while the peer of 100 abandoned operations hangs', () => {
    const TIME_BUDGET_MS = 400;
    let hanging: RunningApp;
    let closing: Promise<void> | undefined;
    let gate: NotifyGate;
    const close = () => (closing ??= hanging.close());
    const timed = async <T>(work: Promise<T>, limitMs: number) => {
      const started = Date.now();
      const settled = await Promise.race([work.then(() => true), sleep(limitMs).then(() => false)]);
      return { settled, ms: Date.now() - started };
    };

    beforeEach(async () => {
      hanging = await startApp({ imports: ledgerAppModules(db.url, { reaper: { intervalMs: 3_600_000, timeBudgetMs: TIME_BUDGET_MS } }) }, { adapter });
      gate = hanging.app.get(NotifyGate);
      gate.mode = 'hold';
      closing = undefined;
      await db.query(`DELETE FROM idempotency_records WHERE key LIKE 'hung-%'`);
      await seedAbandoned(db, 'hung-', 100);
    });
    afterEach(async () => {
      gate.mode = 'pass';
      gate.release();
      await close();
      await db.query(`DELETE FROM idempotency_records WHERE key LIKE 'hung-%'`);
    });

    it('still deletes expired records within two passes, each within its time budget', async () => {
      await seed(db, 'outage-', 300, `now() - interval '1 hour'`);
      const reaper = hanging.app.get(IdempotencyReaper);
      for (let pass = 0; pass < 2 && (await countOf(db, 'outage-')) > 0; pass++) {
        expect(await timed(reaper.runPass(), TIME_BUDGET_MS + 1000)).toMatchObject({ settled: true });
      }
      expect(await countOf(db, 'outage-')).toBe(0);
      expect(gate.heldCount).toBeGreaterThan(0); // the completer did try the hanging peer
    });

    it('lets the app shut down within the time budget while a pass waits on the peer', async () => {
      const pass = hanging.app.get(IdempotencyReaper).runPass();
      for (let i = 0; i < 200 && gate.heldCount === 0; i++) await sleep(10);
      expect(gate.heldCount).toBe(1);
      const closed = await timed(close(), TIME_BUDGET_MS + 1000);
      expect(closed.settled).toBe(true);
      expect(closed.ms).toBeLessThanOrEqual(TIME_BUDGET_MS + 100);
      await pass;
    });
  });

  it('runs on its interval and stops at shutdown', async () => {
    const ticking = await startApp({ imports: ledgerAppModules(db.url, { reaper: { intervalMs: 50 } }) }, { adapter });
    await seed(db, 'ticked-', 20, `now() - interval '1 hour'`);
    for (let i = 0; i < 100 && (await countOf(db, 'ticked-')) > 0; i++) await sleep(20);
    expect(await countOf(db, 'ticked-')).toBe(0);
    await ticking.close();
    await seed(db, 'after-close-', 5, `now() - interval '1 hour'`);
    await sleep(200);
    expect(await countOf(db, 'after-close-')).toBe(5);
    await reaper.reap(new Date());
  });

  describe('in an app that imported ScheduleModule.forRoot()', () => {
    const startScheduled = () => startApp({ imports: [...ledgerAppModules(db.url, { reaper: { intervalMs: 50 } }), ScheduleModule.forRoot()] }, { adapter });

    it("lists its interval in the app's SchedulerRegistry, and deleting it there stops the passes", async () => {
      const scheduled = await startScheduled();
      try {
        const registry = scheduled.app.get(SchedulerRegistry);
        expect(registry.getIntervals()).toEqual([IDEMPOTENCY_REAPER_INTERVAL]);
        await seed(db, 'listed-', 20, `now() - interval '1 hour'`);
        for (let i = 0; i < 100 && (await countOf(db, 'listed-')) > 0; i++) await sleep(20);
        expect(await countOf(db, 'listed-')).toBe(0);
        registry.deleteInterval(IDEMPOTENCY_REAPER_INTERVAL);
        await sleep(100); // a pass that had started finishes
        await seed(db, 'unlisted-', 5, `now() - interval '1 hour'`);
        await sleep(200);
        expect(await countOf(db, 'unlisted-')).toBe(5);
      } finally {
        await scheduled.close();
      }
      await reaper.reap(new Date());
    });

    it('stops at shutdown while its interval is still listed', async () => {
      const scheduled = await startScheduled();
      expect(scheduled.app.get(SchedulerRegistry).getIntervals()).toContain(IDEMPOTENCY_REAPER_INTERVAL);
      await scheduled.close();
      await seed(db, 'scheduled-close-', 5, `now() - interval '1 hour'`);
      await sleep(200);
      expect(await countOf(db, 'scheduled-close-')).toBe(5);
      await reaper.reap(new Date());
    });
  });
});
