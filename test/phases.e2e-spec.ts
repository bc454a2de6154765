import pg from 'pg';
import request from 'supertest';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { DataSource } from 'typeorm';
import { Controller, Post, Res } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Idempotent } from '../src/idempotency/index.js';
import { AbandonedClaimsCompleter, downstreamKey, PhasedClaim, type RunId } from '../src/idempotency/phases/index.js';
import { HTTP_ADAPTERS, startApp, type RunningApp } from './support/http-app.js';
import { LEDGER_SCHEMA, LedgerTransfer, ledgerAppModules, NotifyGate } from './support/ledger-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

const PATH = '/entries/transfers';
const OPERATION = 'POST /entries/transfers';
// No replay cache: some tests age records in the database, behind the cache's back.
const MODULE_OPTIONS = { lease: 60_000, maxAttempts: 3, reaper: false, replayCacheSize: 0 } as const;

describe.each(HTTP_ADAPTERS)('phased operations (%s)', (adapter) => {
  let db: TestDatabase;
  let running: RunningApp;
  let gate: NotifyGate;
  let transfer: LedgerTransfer;
  let keySeq = 0;
  const newKey = () => `phase-${++keySeq}-${Date.now()}`;
  const send = (key: string, label: string, url = running.url) =>
    Promise.resolve(request(url).post(PATH).set('Idempotency-Key', key).set('X-Tenant', 'acme').send({ label }));
  const recordOf = async (key: string) =>
    (await db.query<{ status: string; recovery_point: string | null; attempts: number; failure_reason: string | null }>(
      `SELECT status, recovery_point, attempts, failure_reason FROM idempotency_records WHERE key = $1`,
      [key],
    ))[0];
  /** The run of a key as its record holds it, for the documented downstream key formula. */
  const runOf = async (key: string) =>
    (await db.query<RunId>(
      `SELECT scope, operation, key, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS "claimedAt" FROM idempotency_records WHERE key = $1`,
      [key],
    ))[0];
  const waitFor = async (condition: () => boolean) => {
    for (let i = 0; i < 200 && !condition(); i++) await sleep(10);
    expect(condition()).toBe(true);
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(LEDGER_SCHEMA);
    running = await startApp({ imports: ledgerAppModules(db.url, MODULE_OPTIONS) }, { adapter });
    gate = running.app.get(NotifyGate);
    transfer = running.app.get(LedgerTransfer);
  });
  beforeEach(() => {
    gate.mode = 'pass';
    Object.assign(transfer.runs, { debit: 0, notify: 0, credit: 0 });
  });
  afterAll(async () => {
    gate?.release();
    await running?.close();
    await db?.drop();
  });

  it('runs each phase once, calls the peer with the derived key, and replays the outcome', async () => {
    const key = newKey();
    const first = await send(key, 'once');
    expect(first.status).toBe(201);
    const replay = await send(key, 'once');
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(first.text);
    expect(transfer.runs).toEqual({ debit: 1, notify: 1, credit: 1 });
    expect(gate.delivered).toContain(downstreamKey(await runOf(key), 'notify'));
    expect(await recordOf(key)).toMatchObject({ status: 'completed', recovery_point: 'credit' });
  });

  it('resumes at the first unfinished phase after a failure', async () => {
    const key = newKey();
    gate.mode = 'fail';
    expect((await send(key, 'resume')).status).toBe(503);
    expect(await recordOf(key)).toMatchObject({ status: 'in_progress', recovery_point: 'debit' });
    gate.mode = 'pass';
    const retry = await send(key, 'resume');
    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBeUndefined();
    expect(transfer.runs).toEqual({ debit: 1, notify: 2, credit: 1 });
    expect(gate.delivered.slice(-1)).toEqual([downstreamKey(await runOf(key), 'notify')]);
    expect(await db.query(`SELECT label FROM ledger_entries WHERE label LIKE '%:resume' ORDER BY id`)).toEqual([
      { label: 'debit:resume' },
      { label: 'credit:resume' },
    ]);
  });

  it('calls the peer with a new downstream key in a new run of a key after its record expired', async () => {
    const key = newKey();
    expect((await send(key, 'rerun')).status).toBe(201);
    const firstRun = await runOf(key);
    await db.query(`UPDATE idempotency_records SET expires_at = now() - interval '1 second' WHERE key = $1`, [key]);
    const again = await send(key, 'rerun');
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    expect(gate.delivered.slice(-2)).toEqual([downstreamKey(firstRun, 'notify'), downstreamKey(await runOf(key), 'notify')]);
    expect(new Set(gate.delivered.slice(-2)).size).toBe(2);
  });

  it('makes a duplicate wait while the lease is live, then answers 409 with Retry-After', async () => {
    const key = newKey();
    gate.mode = 'hold';
    const owner = send(key, 'held');
    await waitFor(() => gate.heldCount === 1);
    const duplicate = await send(key, 'held');
    expect(duplicate.status).toBe(409);
    expect(duplicate.headers['retry-after']).toBe('1');
    gate.release();
    expect((await owner).status).toBe(201);
    expect((await send(key, 'held')).headers['idempotent-replayed']).toBe('true');
  });

  it('answers 30 duplicates within wait while a phase holds the record locked for 5 s, and leaves the pool free', async () => {
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    await holder.query('BEGIN');
    await holder.query('SELECT id FROM ledger_locks WHERE id = 1 FOR UPDATE');
    let held = true;
    const released = sleep(5000).then(() => {
      held = false;
      return holder.query('ROLLBACK');
    });
    try {
      const key = newKey();
      const sendLocked = () => Promise.resolve(request(running.url).post('/entries/locked-transfers').set('Idempotency-Key', key).set('X-Tenant', 'acme').send({ label: 'locked' }));
      const owner = sendLocked();
      const ownerWaits = async () => (await db.query(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)).length > 0;
      for (let i = 0; i < 200 && !(await ownerWaits()); i++) await sleep(10);
      expect(await ownerWaits()).toBe(true);

      const dataSource = running.app.get(DataSource);
      const poolWaits: number[] = [];
      let probing = true;
      const probe = (async () => {
        while (probing) {
          const started = performance.now();
          await dataSource.query('SELECT 1');
          poolWaits.push(performance.now() - started);
          await sleep(20);
        }
      })();
      const duplicates = await Promise.all(Array.from({ length: 30 }, sendLocked));
      // Answered while the row was still held: before the fix, each waited out the 5 s hold.
      expect(held).toBe(true);
      probing = false;
      await probe;
      expect(duplicates.map((duplicate) => duplicate.status)).toEqual(Array(30).fill(409));
      // The pool stayed free: before the fix, a probe waited out the hold too. Half of it leaves room for a loaded machine.
      expect(poolWaits.length).toBeGreaterThan(10);
      expect(Math.max(...poolWaits)).toBeLessThan(2500);
      await released;
      expect((await owner).status).toBe(201);
    } finally {
      await released;
      await holder.end();
    }
  });

  it('fences off a stale owner once a retry has taken its lapsed lease over', async () => {
    const key = newKey();
    gate.mode = 'hold';
    const stale = send(key, 'fenced');
    await waitFor(() => gate.heldCount === 1);
    // The owner stalls past its lease (as in a long GC pause); its heartbeat is 20 s away.
    await db.query(`UPDATE idempotency_records SET lease_expires_at = now() - interval '1 second' WHERE key = $1`, [key]);
    gate.mode = 'pass';
    const retry = await send(key, 'fenced');
    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBeUndefined();
    gate.release();
    expect((await stale).status).toBe(409);
    expect((await send(key, 'fenced')).text).toBe(retry.text);
    expect(await db.query(`SELECT label FROM ledger_entries WHERE label LIKE 'credit:fenced'`)).toHaveLength(1);
    expect(await recordOf(key)).toMatchObject({ status: 'completed', attempts: 2 });
  });

  it('lets the completer finish an abandoned claim without the client', async () => {
    const key = newKey();
    gate.mode = 'fail';
    expect((await send(key, 'abandoned')).status).toBe(503);
    gate.mode = 'pass';
    expect(await running.app.get(AbandonedClaimsCompleter).completeAbandoned()).toMatchObject({ completed: 1 });
    const retry = await send(key, 'abandoned');
    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.body).toMatchObject({ receipt: expect.stringMatching(/^receipt-/) });
    expect(transfer.runs.debit).toBe(1);
  });

  it('replays the same status, headers and body whether the request or the completer finished the operation', async () => {
    const key = newKey();
    const sendShaped = () => Promise.resolve(request(running.url).post('/entries/shaped-transfers').set('Idempotency-Key', key).set('X-Tenant', 'acme').send({ label: 'shaped' }));
    const answer = (response: request.Response) => ({
      status: response.status,
      contentType: response.headers['content-type'],
      location: response.headers.location,
      etag: response.headers.etag,
      body: response.text,
    });
    const live = await sendShaped();
    expect(live.status).toBe(201);
    const finishedLive = answer(await sendShaped());
    expect(finishedLive).toEqual(answer(live));
    // The same run again, as if its owner had died before recording: every phase's result is stored, so only the ending differs.
    await db.query(
      `UPDATE idempotency_records SET status = 'in_progress', response_status = NULL, response_headers = NULL, response_body = NULL, completed_at = NULL,
              owner_token = gen_random_uuid(), lease_expires_at = now() - interval '1 second' WHERE key = $1`,
      [key],
    );
    expect(await running.app.get(AbandonedClaimsCompleter).completeAbandoned()).toMatchObject({ completed: 1 });
    expect(answer(await sendShaped())).toEqual(finishedLive);
  });

  it('answers the operation’s response even when the handler reshapes what run() settled with', async () => {
    const key = newKey();
    const sendWrapped = () => Promise.resolve(request(running.url).post('/entries/wrapped-transfers').set('Idempotency-Key', key).set('X-Tenant', 'acme').send({ label: 'wrapped' }));
    const live = await sendWrapped();
    expect(live.status).toBe(201);
    expect(live.body).toEqual({ debit: expect.any(Number), receipt: expect.any(String), credit: expect.any(Number) });
    expect((await sendWrapped()).text).toBe(live.text);
  });

  it('marks a claim failed once it runs out of attempts, and replays that failure', async () => {
    const key = newKey();
    gate.mode = 'fail';
    expect((await send(key, 'doomed')).status).toBe(503);
    const completer = running.app.get(AbandonedClaimsCompleter);
    for (let pass = 0; pass < MODULE_OPTIONS.maxAttempts; pass++) await completer.completeAbandoned();
    expect(await recordOf(key)).toMatchObject({ status: 'failed', failure_reason: expect.stringContaining('gave up after 3 attempts') });
    gate.mode = 'pass';
    const retry = await send(key, 'doomed');
    expect(retry.status).toBe(500);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.body).toMatchObject({ type: 'urn:nest-idempotency:problem:operation-failed' });
    expect(transfer.runs.credit).toBe(0);
  });

  it('frees the key of a request that failed before its operation started', async () => {
    const key = newKey();
    const failed = await request(running.url).post('/entries/transfers/unstarted').set('Idempotency-Key', key).set('X-Tenant', 'acme').send({});
    expect(failed.status).toBe(500);
    expect(await recordOf(key)).toBeUndefined();
  });

  it('lets the completer discard a claim whose owner died before its operation started', async () => {
    const key = newKey();
    await db.query(
      `INSERT INTO idempotency_records (scope, operation, key, fingerprint, status, expires_at, owner_token, lease_expires_at)
       VALUES ('tenant:acme', $1, $2, 'f', 'in_progress', now() + interval '1 day', gen_random_uuid(), now() - interval '1 second')`,
      [OPERATION, key],
    );
    expect(await running.app.get(AbandonedClaimsCompleter).completeAbandoned()).toMatchObject({ discarded: 1 });
    expect(await recordOf(key)).toBeUndefined();
  });

  it('leaves a started claim whose operation this process does not register to a process that does, never marking it failed', async () => {
    const key = newKey();
    await db.query(
      `INSERT INTO idempotency_records (scope, operation, key, fingerprint, status, expires_at, owner_token, lease_expires_at, resume, recovery_point)
       VALUES ('tenant:acme', $1, $2, 'f', 'in_progress', now() + interval '1 day', gen_random_uuid(), now() - interval '1 second',
               '{"operation": "registered-elsewhere", "input": {}}', 'charge')`,
      [OPERATION, key],
    );
    const pass = await running.app.get(AbandonedClaimsCompleter).completeAbandoned();
    expect(pass).toMatchObject({ failed: 0, completed: 0 });
    const [record] = await db.query<{ status: string; attempts: number }>(`SELECT status, attempts FROM idempotency_records WHERE key = $1`, [key]);
    // Its charge may have happened: a failure recorded here would tell every retry it did not.
    expect(record).toEqual({ status: 'in_progress', attempts: 1 });
    await db.query(`DELETE FROM idempotency_records WHERE key = $1`, [key]);
  });

  it('refuses at startup a phased route that sets response headers itself', async () => {
    @Controller('located')
    class LocatedController {
      @Post()
      @Idempotent({ phases: true })
      async create(@PhasedClaim() claim: PhasedClaim, @Res({ passthrough: true }) response: { setHeader(name: string, value: string): void }) {
        const transfer = await claim.run(LedgerTransfer, { label: 'located' });
        response.setHeader('Location', `/entries/${transfer.credit}`);
        return transfer;
      }
    }
    const [typeorm, idempotency, entries] = ledgerAppModules(db.url, MODULE_OPTIONS);
    const moduleRef = await Test.createTestingModule({ imports: [typeorm, idempotency, entries], controllers: [LocatedController] }).compile();
    const app = moduleRef.createNestApplication({ logger: false });
    await expect(app.init()).rejects.toThrow(/set headers such as Location in the operation's respond\(\)/);
    await app.close();
  });

  it('never lets two instances complete the same claim', async () => {
    gate.mode = 'fail';
    const keys = Array.from({ length: 8 }, newKey);
    for (const key of keys) expect((await send(key, 'contended')).status).toBe(503);
    const other = await startApp({ imports: ledgerAppModules(db.url, MODULE_OPTIONS) }, { adapter });
    try {
      gate.mode = 'pass';
      const otherGate = other.app.get(NotifyGate);
      const passes = await Promise.all([running, other].map((instance) => instance.app.get(AbandonedClaimsCompleter).completeAbandoned()));
      expect(passes[0].completed + passes[1].completed).toBe(keys.length);
      const expected = await Promise.all(keys.map(async (key) => downstreamKey(await runOf(key), 'notify')));
      const delivered = [...gate.delivered, ...otherGate.delivered].filter((k) => expected.includes(k));
      expect(delivered).toHaveLength(keys.length);
      expect(new Set(delivered).size).toBe(keys.length);
    } finally {
      await other.close();
    }
  });
});
