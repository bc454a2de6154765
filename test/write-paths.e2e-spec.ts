import request from 'supertest';
import { setTimeout as sleep } from 'node:timers/promises';
import { IdempotencyModule, TransactionClosedError } from '../src/idempotency/index.js';
import { HTTP_ADAPTERS, startApp, type RunningApp } from './support/http-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { type NoteBody, type NoteWriterApi, WRITE_PATHS, writePathsApp, writePathsTypeOrm, WRITTEN_NOTES_SCHEMA } from './support/write-paths-app.js';

/**
 * Inside an @Idempotent() request no business write commits on its own,
 * whichever way it reaches the database: each joins the claim's transaction.
 */
describe.each(HTTP_ADAPTERS)('business writes join the transaction (%s)', (adapter) => {
  let db: TestDatabase;
  let running: RunningApp;
  let writer: NoteWriterApi;
  let keySeq = 0;
  const newKey = () => `write-${++keySeq}-${Date.now()}`;
  const unique = (label: string) => `${label}-${adapter}-${++keySeq}`;
  const post = (path: string, key: string | undefined, body: NoteBody) => {
    const req = request(running.url).post(path);
    if (key !== undefined) req.set('Idempotency-Key', key);
    return Promise.resolve(req.send(body));
  };
  const notesLabelled = async (label: string) => Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM written_notes WHERE label = $1`, [label]))[0].n);
  const recordOf = async (key: string) => (await db.query<{ status: string }>(`SELECT status FROM idempotency_records WHERE key = $1`, [key]))[0];

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(WRITTEN_NOTES_SCHEMA);
    const app = writePathsApp();
    running = await startApp(
      { imports: [writePathsTypeOrm(db.url), IdempotencyModule.forRoot({ tenant: 'shared', reaper: false, replayCacheSize: 0 }), app.module] },
      { adapter },
    );
    writer = running.app.get(app.writer);
  });
  afterAll(async () => {
    await running?.close();
    await db?.drop();
  });

  describe.each(WRITE_PATHS)('through %s', (path) => {
    it('leaves nothing behind when the handler throws after writing', async () => {
      const label = unique('thrown');
      const key = newKey();
      expect((await post(`/writes/${path}`, key, { label, fail: true })).status).toBe(500);
      expect(await notesLabelled(label)).toBe(0);
      expect(await recordOf(key)).toBeUndefined();
    });

    it('leaves exactly one row after 20 concurrent duplicates, the first executions failing', async () => {
      const label = unique('duplicates');
      const key = newKey();
      const answers = await Promise.all(Array.from({ length: 20 }, () => post(`/writes/${path}`, key, { label, failFirst: 2 })));
      const statuses = answers.map((answer) => answer.status);
      expect(statuses.filter((status) => status !== 201 && status !== 500)).toEqual([]);
      // Each failing run held the key alone, and answers its own failure.
      expect(statuses.filter((status) => status === 500).length).toBe(2);
      const succeeded = answers.filter((answer) => answer.status === 201);
      expect(new Set(succeeded.map((answer) => answer.text)).size).toBe(1);
      expect(await notesLabelled(label)).toBe(1);
      expect(await recordOf(key)).toEqual({ status: 'completed' });
    });

    it('commits the write with the record, and a replay writes nothing', async () => {
      const label = unique('committed');
      const key = newKey();
      const first = await post(`/writes/${path}`, key, { label });
      expect(first.status).toBe(201);
      expect(await notesLabelled(label)).toBe(1);
      expect(await recordOf(key)).toEqual({ status: 'completed' });
      const replay = await post(`/writes/${path}`, key, { label });
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(first.text);
      expect(await notesLabelled(label)).toBe(1);
    });

    it('answers 503 and keeps nothing when the connection is lost while the handler waits on other work', async () => {
      const label = unique('lost');
      const key = newKey();
      expect((await post(`/writes/${path}`, key, { label, loseConnection: true })).status).toBe(503);
      expect(await notesLabelled(label)).toBe(0);
      expect(await recordOf(key)).toBeUndefined();
    });

    it('changes nothing outside an idempotent request: the write commits on its own', async () => {
      const label = unique('unprotected');
      expect((await post(`/writes/${path}/unprotected`, undefined, { label, fail: true })).status).toBe(500);
      expect(await notesLabelled(label)).toBe(1);
    });
  });

  it('makes a nested dataSource.transaction() a savepoint of the claim’s transaction', async () => {
    const label = unique('nested');
    const answer = await post('/writes/savepoint', newKey(), { label });
    expect(answer.status).toBe(201);
    expect(answer.body).toEqual({ sameTransaction: true });
    expect(await notesLabelled(`outer:${label}`)).toBe(1);
    expect(await notesLabelled(`inner:${label}`)).toBe(0);
    expect(await notesLabelled(`after:${label}`)).toBe(1);
  });

  it('rolls back what surrounds a nested dataSource.transaction() when the handler fails', async () => {
    const label = unique('nested-failed');
    expect((await post('/writes/savepoint', newKey(), { label, fail: true })).status).toBe(500);
    expect(await notesLabelled(`outer:${label}`)).toBe(0);
    expect(await notesLabelled(`after:${label}`)).toBe(0);
  });

  it('joins the transaction a handler runs on a QueryRunner it created: the request’s failure rolls back what its commitTransaction() released', async () => {
    const label = unique('own-runner');
    const key = newKey();
    expect((await post('/writes/own-runner', key, { label })).status).toBe(500);
    expect(await notesLabelled(label)).toBe(0);
    expect(await recordOf(key)).toBeUndefined();
  });

  it('lets a handler write outside the transaction on purpose, with IdempotencyTransactionHost.outside()', async () => {
    const label = unique('outside');
    expect((await post('/writes/outside', newKey(), { label })).status).toBe(500);
    expect(await notesLabelled(label)).toBe(1);
  });

  it.each(['late', 'late-host'])('commits a late write on its own once the request has committed, as without the module (%s)', async (route) => {
    const label = unique(route);
    writer.lateFailures.length = 0;
    expect((await post(`/writes/${route}`, newKey(), { label })).status).toBe(201);
    for (let i = 0; i < 100 && (await notesLabelled(label)) === 0; i++) await sleep(10);
    expect(await notesLabelled(label)).toBe(1);
    expect(writer.lateFailures).toEqual([]);
  });

  it('refuses a late write once the request has rolled back, so that nothing of a failed request commits', async () => {
    const label = unique('late-failed');
    writer.lateFailures.length = 0;
    expect((await post('/writes/late-failed', newKey(), { label })).status).toBe(500);
    for (let i = 0; i < 100 && writer.lateFailures.length === 0; i++) await sleep(10);
    expect(writer.lateFailures).toEqual([expect.any(TransactionClosedError)]);
    expect(await notesLabelled(label)).toBe(0);
  });

  it('runs the module’s own statements outside a request’s transaction: the reaper’s deletes stay when the request fails', async () => {
    const key = newKey();
    await db.query(
      `INSERT INTO idempotency_records (scope, operation, key, fingerprint, status, created_at, expires_at, response_status)
       VALUES ('anonymous', 'expired', $1, 'f', 'completed', now() - interval '2 days', now() - interval '1 day', 201)`,
      [key],
    );
    expect((await post('/writes/reap', newKey(), { label: unique('reap') })).status).toBe(500);
    expect(await recordOf(key)).toBeUndefined();
  });

  describe('on a phased route', () => {
    it('joins a write in a local phase to that phase’s transaction', async () => {
      const label = unique('phase-failed');
      // The operation had started: it answers 503 operation-unfinished (retry with the same key).
      expect((await post('/writes/phased', newKey(), { label, fail: true })).status).toBe(503);
      expect(await notesLabelled(`phase:${label}`)).toBe(0);
    });

    it('keeps nothing of a local phase whose connection is lost while it waits on other work', async () => {
      const label = unique('phase-lost');
      expect((await post('/writes/phased', newKey(), { label, loseConnection: true })).status).toBe(503);
      expect(await notesLabelled(`phase:${label}`)).toBe(0);
    });

    it('runs writes outside local phases on their own, as outside a request', async () => {
      const label = unique('phased');
      const key = newKey();
      const first = await post('/writes/phased', key, { label });
      expect(first.status).toBe(201);
      expect(await notesLabelled(`before-run:${label}`)).toBe(1);
      expect(await notesLabelled(`phase:${label}`)).toBe(1);
      expect(await notesLabelled(`external:${label}`)).toBe(1);
      expect(await recordOf(key)).toEqual({ status: 'completed' });
    });
  });
});
