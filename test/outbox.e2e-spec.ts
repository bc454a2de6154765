import request from 'supertest';
import { setTimeout as sleep } from 'node:timers/promises';
import { IdempotencyEvents, type IdempotencyEvent, IdempotencyReaper } from '../src/idempotency/index.js';
import { OutboxReaping, OutboxRelay, Outbox, OutboxOutsideTransactionError } from '../src/idempotency/outbox/index.js';
import { createHash } from 'node:crypto';
import { startApp, type RunningApp } from './support/http-app.js';
import { LEDGER_SCHEMA } from './support/ledger-app.js';
import { outboxAppModules, RecordingPublisher, UNSTORABLE_EVENTS } from './support/outbox-app.js';
import type { OutboxMessage } from '../src/idempotency/outbox/index.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

/** RFC 9562 version 8 over the SHA-256 of the fields, one per line: the layout the outbox documents for derived ids. */
function derivedEventId(fields: string[]): string {
  const h = createHash('sha256').update(fields.join('\n')).digest('hex');
  const hex = h.slice(0, 12) + '8' + h.slice(13, 16) + '89ab'[parseInt(h[16], 16) % 4] + h.slice(17, 32);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * The outbox and its relay against a real PostgreSQL, with a publisher the
 * test steers (the NATS publisher has a suite of its own). Adapter-neutral:
 * nothing here depends on the HTTP adapter, so it runs on Express only.
 */
describe('the outbox', () => {
  let db: TestDatabase;
  const apps: RunningApp[] = [];
  const start = async (publisher: RecordingPublisher | undefined, relay: Record<string, unknown> = {}, notify = true) => {
    const running = await startApp({
      imports: outboxAppModules(db.url, { publisher, notify, relay: { pollIntervalMs: 100, maxAttempts: 3, backoff: { baseMs: 20, maxMs: 100 }, unavailablePauseMs: 50, ...relay } }),
    });
    apps.push(running);
    return running;
  };
  const post = (app: RunningApp, key: string, body: object, tenant = 'acme') => request(app.url).post('/eventful').set('Idempotency-Key', key).set('X-Tenant', tenant).send(body);
  const rows = (where = 'true', params: unknown[] = []) =>
    db.query<{ id: string; type: string; status: string; attempts: number; ordering_key: string | null; seq: string }>(`SELECT id, type, status, attempts, ordering_key, seq FROM idempotency_outbox WHERE ${where} ORDER BY seq`, params);
  const until = async (check: () => Promise<boolean> | boolean, timeoutMs = 10_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error('timed out waiting');
      await sleep(20);
    }
  };
  /** Inserts pending events directly, `perKey` for each key, in key-interleaved order. */
  const seedEvents = (type: string, keys: number, perKey: number) =>
    db.query(
      `INSERT INTO idempotency_outbox (id, type, payload, ordering_key)
       SELECT gen_random_uuid(), $1, jsonb_build_object('n', n, 'key', 'k' || (n % $2::int)), 'k' || (n % $2::int) FROM generate_series(0, $2::int * $3::int - 1) AS n ORDER BY n`,
      [type, keys, perKey],
    );

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(LEDGER_SCHEMA);
  });
  afterEach(async () => {
    for (const app of apps.splice(0)) await app.close();
    await db.query(`DELETE FROM idempotency_outbox`);
  });
  afterAll(async () => {
    await db?.drop();
  });

  describe('writing events', () => {
    it('commits an event with its change, with an id derived from the operation, and writes nothing for a replay', async () => {
      const app = await start(undefined);
      const body = { label: 'a', events: [{ type: 'entry.created', key: 'e-1' }, { type: 'entry.audited' }] };
      const first = await post(app, 'derived-1', body).expect(201);
      await post(app, 'derived-1', body).expect(201).expect('idempotent-replayed', 'true');
      const events = await rows();
      expect(events.map((event) => event.id)).toEqual(first.body.events);
      expect(events).toHaveLength(2);
      // RFC 9562 version 8 (custom), variant 10xx.
      for (const { id } of events) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(events[0].id).not.toBe(events[1].id);
    });

    it('derives each id from the record’s scope, operation, key and claim time, the phase and the index', async () => {
      const app = await start(undefined);
      const key = 'derived';
      const first = await post(app, key, { label: 'd', events: [{ type: 'entry.created' }, { type: 'entry.audited' }] }).expect(201);
      const [record] = await db.query<{ scope: string; operation: string; micros: string }>(
        `SELECT scope, operation, (extract(epoch FROM created_at) * 1000000)::bigint AS micros FROM idempotency_records WHERE key = $1`,
        [key],
      );
      const expected = [0, 1].map((index) => derivedEventId([record.scope, record.operation, key, record.micros, '', String(index)]));
      expect(first.body.events).toEqual(expected);
    });

    it('writes no event when the handler fails: the event rolls back with the change', async () => {
      const app = await start(undefined);
      await post(app, 'failing-1', { label: 'f', events: [{ type: 'entry.created' }], fail: true }).expect(500);
      expect(await rows()).toEqual([]);
      expect(await db.query(`SELECT 1 FROM idempotency_records WHERE key = 'failing-1'`)).toEqual([]);
    });

    it('names the same key under another tenant, or reused after retention, with new ids', async () => {
      const app = await start(undefined);
      const body = { label: 'r', events: [{ type: 'entry.created' }] };
      const acme = (await post(app, 'reused-1', body, 'acme').expect(201)).body.events[0];
      const globex = (await post(app, 'reused-1', body, 'globex').expect(201)).body.events[0];
      await db.query(`UPDATE idempotency_records SET expires_at = now() - interval '1 second' WHERE key = 'reused-1' AND scope = 'tenant:acme'`);
      const again = (await post(app, 'reused-1', body, 'acme').expect(201)).body.events[0];
      expect(new Set([acme, globex, again]).size).toBe(3);
    });

    it('refuses an event PostgreSQL cannot store before sending it, naming the field: the handler catches it and its other writes commit', async () => {
      const app = await start(undefined);
      const send = () => request(app.url).post('/eventful/despite-unstorable').set('Idempotency-Key', 'unstorable-1').set('X-Tenant', 'acme').send({ label: 'despite', events: [{ type: 'entry.created' }] });
      const first = await send().expect(201);
      expect(first.body.refused).toEqual(UNSTORABLE_EVENTS.map(([field]) => field));
      expect((await rows()).map((event) => [event.id, event.type])).toEqual([[first.body.events[0], 'entry.created']]);
      expect(await db.query(`SELECT label FROM ledger_entries WHERE id = $1`, [first.body.entry])).toEqual([{ label: 'despite' }]);
      const replay = await send().expect(201).expect('idempotent-replayed', 'true');
      expect(replay.text).toBe(first.text);
    });

    it('refuses an event outside a transaction, saying how to add one', async () => {
      const app = await start(undefined);
      await expect(app.app.get(Outbox).add({ type: 'loose', payload: {} })).rejects.toThrow(OutboxOutsideTransactionError);
    });
  });

  describe('the relay', () => {
    it('publishes each committed event once, acked before it is marked sent', async () => {
      const publisher = new RecordingPublisher();
      const app = await start(publisher);
      const seen: IdempotencyEvent[] = [];
      app.app.get(IdempotencyEvents).subscribe((event) => seen.push(event));
      for (let i = 0; i < 5; i++) await post(app, `once-${i}`, { label: `o${i}`, events: [{ type: 'entry.created', key: `o${i}` }] }).expect(201);
      await until(async () => (await rows(`status = 'pending'`)).length === 0);
      expect(publisher.published.map((message) => message.id).sort()).toEqual((await rows()).map((row) => row.id).sort());
      expect(publisher.published[0]).toMatchObject({ type: 'entry.created', payload: { label: expect.any(String) }, sourceKeyHash: expect.stringMatching(/^[0-9a-f]{16}$/) });
      // Logs and outbox events name a request's key by the same hash: each published event's is one of the attempts'.
      const attemptKeyHashes = seen.flatMap((event) => (event.kind === 'attempt' ? [event.keyHash] : []));
      expect(attemptKeyHashes).toHaveLength(5);
      for (const message of publisher.published) expect(attemptKeyHashes).toContain(message.sourceKeyHash);
      expect(seen.filter((event) => event.kind === 'outbox_relayed').reduce((sum, event) => sum + (event as { published: number }).published, 0)).toBe(5);
      expect(await app.app.get(OutboxRelay).stats()).toEqual({ pending: 0, oldestPendingAgeSeconds: 0 });
    });

    it('wakes on a commit through LISTEN/NOTIFY, long before its poll', async () => {
      const publisher = new RecordingPublisher();
      const app = await start(publisher, { pollIntervalMs: 60_000 });
      await sleep(300); // the relay's first empty batch, then it waits on the notification
      const started = Date.now();
      await post(app, 'woken-1', { label: 'w', events: [{ type: 'entry.created' }] }).expect(201);
      await until(() => publisher.published.length === 1, 5000);
      expect(Date.now() - started).toBeLessThan(2000);
    });

    it('keeps commit order per key while a head event fails, and lets other keys pass', async () => {
      const publisher = new RecordingPublisher();
      publisher.rejections.set('flaky', 2); // the head fails twice, then goes through
      const app = await start(undefined);
      await post(app, 'ordered-1', { label: 'h', events: [{ type: 'flaky', key: 'K' }, { type: 'after', key: 'K' }, { type: 'other', key: 'L' }] }).expect(201);
      await post(app, 'ordered-2', { label: 'h2', events: [{ type: 'later', key: 'K' }] }).expect(201);
      await app.close();
      apps.length = 0;
      await start(publisher, { maxAttempts: 5 });
      await until(async () => (await rows(`status = 'pending'`)).length === 0);
      const types = publisher.published.map((message) => message.type);
      expect(types.filter((type) => type !== 'other')).toEqual(['flaky', 'after', 'later']);
      expect(types.indexOf('other')).toBeLessThan(types.indexOf('flaky'));
      expect((await rows(`type = 'flaky'`))[0]).toMatchObject({ status: 'sent', attempts: 3 });
    });

    it('makes an event that keeps failing a dead letter after maxAttempts, and releases its key', async () => {
      const publisher = new RecordingPublisher();
      publisher.rejections.set('poison', Infinity);
      const app = await start(publisher);
      const seen: IdempotencyEvent[] = [];
      app.app.get(IdempotencyEvents).subscribe((event) => seen.push(event));
      await post(app, 'poison-1', { label: 'p', events: [{ type: 'poison', key: 'P' }, { type: 'behind', key: 'P' }] }).expect(201);
      await until(async () => (await rows(`status = 'pending'`)).length === 0);
      expect(await rows()).toEqual([
        expect.objectContaining({ type: 'poison', status: 'dead', attempts: 3 }),
        expect.objectContaining({ type: 'behind', status: 'sent', attempts: 1 }),
      ]);
      expect(seen).toContainEqual(expect.objectContaining({ kind: 'outbox_dead_letter', type: 'poison', attempts: 3, error: 'rejected poison (test)' }));
      publisher.rejections.delete('poison');
      expect(await app.app.get(OutboxRelay).requeueDead()).toBe(1);
      await until(async () => (await rows(`type = 'poison' AND status = 'sent'`)).length === 1);
    });

    it('counts no attempt while the broker is unreachable, and delivers once it is back', async () => {
      const publisher = new RecordingPublisher();
      publisher.unavailable = true;
      const app = await start(publisher);
      await post(app, 'down-1', { label: 'd', events: [{ type: 'entry.created' }] }).expect(201);
      await sleep(500);
      expect(await rows()).toEqual([expect.objectContaining({ status: 'pending', attempts: 0 })]);
      publisher.unavailable = false;
      await until(() => publisher.published.length === 1);
    });

    it('with several relays, publishes every event exactly once and each key in order', async () => {
      const log: OutboxMessage[] = [];
      const inFlight = new Set<string>();
      const publishers = [0, 1, 2].map(() => Object.assign(new RecordingPublisher(log, inFlight), { delayMs: 3 }));
      // Three relays in one process (three apps on the same database), small batches so that they interleave.
      for (const publisher of publishers) await start(publisher, { batchSize: 7, pollIntervalMs: 20 }, false);
      await seedEvents('bulk', 20, 25);
      await until(async () => (await rows(`status = 'pending'`)).length === 0, 30_000);
      const ids = log.map((message) => message.id);
      expect(ids).toHaveLength(500);
      expect(new Set(ids).size).toBe(500);
      expect(publishers.map((publisher) => publisher.overlaps)).toEqual([0, 0, 0]);
      for (const publisher of publishers) expect(publisher.mine.length).toBeGreaterThan(0);
      for (let key = 0; key < 20; key++) {
        const sequence = log.filter((message) => message.orderingKey === `k${key}`).map((message) => (message.payload as { n: number }).n);
        expect(sequence).toEqual([...sequence].sort((a, b) => a - b));
      }
    });
  });

  it('deletes settled events after the retention, never pending ones', async () => {
    const app = await start(undefined);
    await seedEvents('aged', 1, 3);
    await db.query(`UPDATE idempotency_outbox SET status = 'sent', settled_at = now() WHERE ctid IN (SELECT ctid FROM idempotency_outbox ORDER BY seq LIMIT 2)`);
    const reaping = app.app.get(OutboxReaping);
    expect((await reaping.reap(new Date())).deleted).toBe(0);
    expect((await reaping.reap(new Date(Date.now() + 25 * 3600_000))).deleted).toBe(2);
    expect(await rows()).toEqual([expect.objectContaining({ status: 'pending' })]);
  });

  it('deletes by the database clock: a process clock an hour ahead keeps events still in retention', async () => {
    // Only Date moves, and keeps ticking, as on a host whose clock is off; every timer stays real.
    vi.useFakeTimers({ now: Date.now() + 3_600_000, shouldAdvanceTime: true, toFake: ['Date'] });
    try {
      const app = await start(undefined);
      await seedEvents('skewed', 1, 3);
      // On the database's clock, against the 24 h retention: two settled half an hour short of it, one half an hour past.
      await db.query(`UPDATE idempotency_outbox SET status = 'sent', settled_at = now() - interval '23 hours 30 minutes'`);
      await db.query(`UPDATE idempotency_outbox SET settled_at = now() - interval '24 hours 30 minutes' WHERE seq = (SELECT min(seq) FROM idempotency_outbox)`);
      const [, ...live] = await rows();
      await app.app.get(IdempotencyReaper).runPass();
      expect(await rows()).toEqual(live);
      expect((await app.app.get(OutboxReaping).reap()).deleted).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });
});
