import { Controller, HttpException, Injectable, Module, Post, Req, Res } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import pg from 'pg';
import request from 'supertest';
import { type AttemptEvent, Idempotent, IdempotencyConfigurationError, IdempotencyModule, type IdempotencyModuleOptions } from '../src/idempotency/index.js';
import { adaptersWithDrivers, CLAIM_DRIVERS } from './support/claim-drivers.js';
import { HTTP_ADAPTERS, startApp, type RunningApp } from './support/http-app.js';
import { COMMIT_FAULTS, LEDGER_SCHEMA, Ledger, ledgerAppModules, tenantFromHeader } from './support/ledger-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { DataSource } from 'typeorm';
import { FastReplay } from '../src/idempotency/flow/fast-replay.js';
import { ReplayLikelihood } from '../src/idempotency/flow/fast-replay.js';

type AsyncOptions = Parameters<typeof IdempotencyModule.forRootAsync>[0];

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.each(adaptersWithDrivers(0))(
  'IdempotencyModule request flow (%s)',
  (_run, adapter, driver) => {
  let db: TestDatabase;
  let running: RunningApp;
  let ledger: Ledger;
  let keySeq = 0;
  const newKey = () => `flow-${++keySeq}-${Date.now()}`;

  const post = (path: string, key: string | undefined, body: object, tenant: string | null = 'acme') => {
    const req = request(running.url).post(path);
    if (key !== undefined) req.set('Idempotency-Key', key);
    if (tenant !== null) req.set('X-Tenant', tenant);
    return req.send(body);
  };
  /** Sends now: supertest only sends once a request is awaited. */
  const inFlight = (test: request.Test) => Promise.resolve(test);
  /**
   * Sends a request, and returns (its answer still to come, wrapped so that awaiting this does not await it) once its
   * handler has begun: after a fixed sleep instead, a loaded machine let the duplicate overtake it.
   */
  const inHandler = async (test: request.Test) => {
    const calls = ledger.calls;
    const answer = inFlight(test);
    await vi.waitFor(() => expect(ledger.calls).toBeGreaterThan(calls), { timeout: 10_000, interval: 5 });
    return { answer };
  };
  const entriesLabelled = async (label: string) => Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM ledger_entries WHERE label = $1`, [label]))[0].n);
  const recordOf = async (key: string) => db.query<{ scope: string; operation: string; status: string }>(`SELECT scope, operation, status FROM idempotency_records WHERE key = $1 ORDER BY scope`, [key]);

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(LEDGER_SCHEMA);
    running = await startApp({ imports: ledgerAppModules(db.url, driver.options, driver.dataSource) }, { adapter });
    await db.query(COMMIT_FAULTS);
    ledger = running.app.get(Ledger);
  });
  afterEach(() => {
    ledger.script.length = 0;
  });
  afterAll(async () => {
    await running?.close();
    await db?.drop();
  });

  describe('failures', () => {
    it('records a storeErrors status as a problem document, undoes the handler’s writes and replays the same bytes', async () => {
      const key = newKey();
      ledger.script.push({ fail: new HttpException({ code: 'card_declined', message: 'Card declined' }, 402) });
      const calls = ledger.calls;
      const first = await post('/entries', key, { label: 'declined' });
      expect(first.status).toBe(402);
      expect(first.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(first.text).toBe(JSON.stringify({ type: 'about:blank', title: 'Payment Required', status: 402, detail: 'Card declined', code: 'card_declined' }));
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      expect(await entriesLabelled('declined')).toBe(0);

      const replay = await post('/entries', key, { label: 'declined' });
      expect(replay.status).toBe(402);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.headers['content-type']).toBe(first.headers['content-type']);
      expect(replay.text).toBe(first.text);
      expect(ledger.calls).toBe(calls + 1);
      expect(await recordOf(key)).toEqual([expect.objectContaining({ status: 'completed' })]);
    });

    it('releases the key after a thrown 500, so the retry runs', async () => {
      const key = newKey();
      ledger.script.push({ fail: new Error('database hiccup') });
      expect((await post('/entries', key, { label: 'boom' })).status).toBe(500);
      expect(await recordOf(key)).toEqual([]);
      expect(await entriesLabelled('boom')).toBe(0);
      const retry = await post('/entries', key, { label: 'boom' });
      expect(retry.status).toBe(201);
      expect(retry.headers['idempotent-replayed']).toBeUndefined();
      expect(await entriesLabelled('boom')).toBe(1);
    });

    it('releases the key after a 4xx that is not in storeErrors', async () => {
      const key = newKey();
      ledger.script.push({ fail: new HttpException('try later', 429) });
      expect((await post('/entries', key, { label: 'throttled' })).status).toBe(429);
      expect((await post('/entries', key, { label: 'throttled' })).status).toBe(201);
      expect(await entriesLabelled('throttled')).toBe(1);
    });

    it('answers 503 with Retry-After when the database connection is lost mid-request, and the retry runs', async () => {
      const key = newKey();
      ledger.script.push({ delayMs: 400 });
      const cut = inFlight(post('/entries', key, { label: 'cut-off' }));
      await sleep(150);
      await db.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle in transaction'`);
      const response = await cut;
      expect(response.status).toBe(503);
      expect(response.headers['retry-after']).toBe('1');
      expect(response.body).toMatchObject({ type: 'urn:nest-idempotency:problem:database-unavailable' });
      // Ended by another session, not for idling: the detail names no setting.
      expect(response.body.detail).not.toContain('idle_in_transaction_session_timeout');
      expect(await recordOf(key)).toEqual([]);
      const retry = await post('/entries', key, { label: 'cut-off' });
      expect(retry.status).toBe(201);
      expect(await entriesLabelled('cut-off')).toBe(1);
    });

    it('answers 400 to a body with no canonical JSON form, and keeps nothing', async () => {
      const key = newKey();
      const response = await request(running.url)
        .post('/entries')
        .set('Idempotency-Key', key)
        .set('X-Tenant', 'acme')
        .set('Content-Type', 'application/json')
        .send('{"label":"\\ud800"}');
      expect(response.status).toBe(400);
      expect(response.body).toMatchObject({ type: 'urn:nest-idempotency:problem:request-not-canonical' });
      expect(await recordOf(key)).toEqual([]);
    });

    it('refuses a response it cannot record, and keeps nothing', async () => {
      const key = newKey();
      const response = await post('/entries/file', key, { label: 'streamed' });
      expect(response.status).toBe(500);
      expect(response.body).toMatchObject({ type: 'urn:nest-idempotency:problem:unstorable-response' });
      expect(await recordOf(key)).toEqual([]);
      expect(await entriesLabelled('streamed')).toBe(0);
    });
  });

  describe('concurrent duplicates', () => {
    /** The fresh answer and the replay among two concurrent answers, whichever request each came from. */
    const freshAndReplay = (answers: request.Response[]) => ({
      fresh: answers.filter((answer) => answer.headers['idempotent-replayed'] === undefined),
      replays: answers.filter((answer) => answer.headers['idempotent-replayed'] === 'true'),
    });

    it('run once, and the other replays the same bytes', async () => {
      const key = newKey();
      ledger.script.push({ delayMs: 300 });
      const { answer: owner } = await inHandler(post('/entries', key, { label: 'awaited' }));
      const duplicate = await post('/entries', key, { label: 'awaited' });
      const answers = [await owner, duplicate];
      expect(answers.map((answer) => answer.status)).toEqual([201, 201]);
      const { fresh, replays } = freshAndReplay(answers);
      expect(fresh).toHaveLength(1);
      expect(replays).toHaveLength(1);
      expect(replays[0].text).toBe(fresh[0].text);
      // The duplicate waited on the owner.
      expect(fresh[0]).toBe(answers[0]);
      expect(await entriesLabelled('awaited')).toBe(1);
    });

    it('get 409 with Retry-After once the route’s wait runs out', async () => {
      const key = newKey();
      // The owner holds the key while its handler runs.
      ledger.script.push({ delayMs: 800 });
      const { answer: owner } = await inHandler(post('/entries/a1/transfers', key, { label: 'slow' }));
      const duplicate = await post('/entries/a1/transfers', key, { label: 'slow' });
      expect(duplicate.status).toBe(409);
      expect(duplicate.headers['retry-after']).toBe('1');
      expect(duplicate.body).toMatchObject({ type: 'urn:nest-idempotency:problem:request-in-progress', status: 409 });
      expect((await owner).status).toBe(200);
      const retry = await post('/entries/a1/transfers', key, { label: 'slow' });
      expect(retry.status).toBe(200);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(await entriesLabelled('a1:slow')).toBe(1);
    });

    it('run as a genuine retry when the owner rolls back', async () => {
      const key = newKey();
      ledger.script.push({ delayMs: 300, fail: new Error('owner failed') });
      const { answer: owner } = await inHandler(post('/entries', key, { label: 'second-chance' }));
      const duplicate = await post('/entries', key, { label: 'second-chance' });
      expect(duplicate.status).toBe(201);
      expect(duplicate.headers['idempotent-replayed']).toBeUndefined();
      expect((await owner).status).toBe(500);
      expect(await entriesLabelled('second-chance')).toBe(1);
    });
  });

  describe('the handler’s own statements', () => {
    it('wait on a lock as long as the connection allows, not the claim’s wait', async () => {
      const holder = new pg.Client({ connectionString: db.url });
      await holder.connect();
      try {
        await holder.query('BEGIN');
        await holder.query('LOCK TABLE ledger_entries IN SHARE MODE');
        const released = sleep(3000).then(() => holder.query('COMMIT'));
        const started = Date.now();
        const response = await post('/entries', newKey(), { label: 'lock-wait' });
        await released;
        expect(response.status).toBe(201);
        expect(Date.now() - started).toBeGreaterThanOrEqual(2900);
        expect(await entriesLabelled('lock-wait')).toBe(1);
      } finally {
        await holder.end();
      }
    });
  });

  describe('scope and operation', () => {
    it('names the operation by method and route template, and fingerprints path params', async () => {
      const key = newKey();
      expect((await post('/entries/a1/transfers', key, { label: 'x' })).status).toBe(200);
      expect(await recordOf(key)).toEqual([{ scope: 'tenant:acme', operation: 'POST /entries/:account/transfers', status: 'completed' }]);
      expect((await post('/entries/a2/transfers', key, { label: 'x' })).status).toBe(422);
    });

    it('runs the same key on another operation independently', async () => {
      const key = newKey();
      const created = await post('/entries', key, { label: 'op-a' });
      const transferred = await post('/entries/a1/transfers', key, { label: 'op-b' });
      expect(created.status).toBe(201);
      expect(transferred.status).toBe(200);
      expect(transferred.headers['idempotent-replayed']).toBeUndefined();
      expect((await recordOf(key)).map((record) => record.operation).sort()).toEqual(['POST /entries', 'POST /entries/:account/transfers']);
    });

    it('keeps each tenant’s keys apart, and a tenant named "anonymous" apart from the shared scope', async () => {
      const key = newKey();
      for (const tenant of ['anonymous', 'acme']) {
        const response = await post('/entries', key, { label: 'scoped' }, tenant);
        expect(response.status).toBe(201);
        expect(response.headers['idempotent-replayed']).toBeUndefined();
      }
      expect((await recordOf(key)).map((record) => record.scope)).toEqual(['tenant:acme', 'tenant:anonymous']);
    });

    it('answers 401 tenant-unresolved to a request the tenant resolver finds no tenant for (none, or an empty one), claiming and running nothing', async () => {
      const key = newKey();
      const calls = ledger.calls;
      for (const tenant of [null, '']) {
        const response = await post('/entries', key, { label: 'no-tenant' }, tenant);
        expect(response.status).toBe(401);
        expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
        expect(response.body).toEqual({
          type: 'urn:nest-idempotency:problem:tenant-unresolved',
          title: 'Tenant unresolved',
          status: 401,
          detail: 'POST /entries: the `tenant` resolver found no tenant for this request, so its key has no scope. Send the request with the credentials that name its tenant.',
        });
      }
      expect(ledger.calls).toBe(calls);
      expect(await recordOf(key)).toEqual([]);
      expect(await entriesLabelled('no-tenant')).toBe(0);
    });

    it('never replays an old version’s outcome', async () => {
      const key = newKey();
      expect((await post('/entries/v1', key, { label: 'versioned' })).headers['idempotent-replayed']).toBeUndefined();
      expect((await post('/entries/v2', key, { label: 'versioned' })).headers['idempotent-replayed']).toBeUndefined();
      expect((await recordOf(key)).map((record) => record.scope)).toEqual(['tenant:acme version:1', 'tenant:acme version:2']);
    });

    it('fingerprints only the listed fields', async () => {
      const key = newKey();
      const first = await post('/entries/labelled', key, { label: 'picked', sentAt: '10:00' });
      const retry = await post('/entries/labelled', key, { label: 'picked', sentAt: '10:05' });
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(retry.text).toBe(first.text);
      expect((await post('/entries/labelled', key, { label: 'other' })).status).toBe(422);
    });

    it('runs a route with an optional key unprotected when the key is absent', async () => {
      const calls = ledger.calls;
      await post('/entries/optional', undefined, { label: 'optional' });
      await post('/entries/optional', undefined, { label: 'optional' });
      expect(ledger.calls).toBe(calls + 2);
      expect(await entriesLabelled('optional')).toBe(2);
      const key = newKey();
      await post('/entries/optional', key, { label: 'optional-keyed' });
      expect((await post('/entries/optional', key, { label: 'optional-keyed' })).headers['idempotent-replayed']).toBe('true');
    });
  });

  describe('replay cache', () => {
    it('replays from the instance that recorded the outcome without reading the record', async () => {
      const key = newKey();
      const first = await post('/entries', key, { label: 'cached' });
      await db.query(`DELETE FROM idempotency_records WHERE key = $1`, [key]); // behind the module's back
      const replay = await post('/entries', key, { label: 'cached' });
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(first.text);
      expect((await post('/entries', key, { label: 'other' })).status).toBe(422);
    });

    it('reads first, with no transaction, while replays are common on an instance with a cold cache', async () => {
      const events: AttemptEvent[] = [];
      const cold = await startApp(
        { imports: ledgerAppModules(db.url, { ...driver.options, replayCacheSize: 0, onEvent: (event) => event.kind === 'attempt' && events.push(event) }, driver.dataSource) },
        { adapter },
      );
      try {
        const key = newKey();
        const send = () => request(cold.url).post('/entries').set('Idempotency-Key', key).set('X-Tenant', 'acme').send({ label: 'retried' });
        const first = await send();
        for (let i = 0; i < 5; i++) expect((await send()).text).toBe(first.text);
        const replays = events.filter((event) => event.outcome === 'replayed');
        expect(replays).toHaveLength(5);
        // The first replays come from a claim that found the key held; then plain reads take over.
        expect(replays[0].claimMs).toBeDefined();
        expect(replays[replays.length - 1].claimMs).toBeUndefined();
      } finally {
        await cold.close();
      }
    });

    it('answers plain reads that arrive together each with its own record, across tenants and alongside mismatches and new keys', async () => {
      const cold = await startApp({ imports: ledgerAppModules(db.url, { ...driver.options, replayCacheSize: 0 }, driver.dataSource) }, { adapter });
      try {
        const send = (key: string, tenant: string, label: string) => Promise.resolve(request(cold.url).post('/entries').set('Idempotency-Key', key).set('X-Tenant', tenant).send({ label }));
        const keys = Array.from({ length: 6 }, newKey);
        const tenants = ['acme', 'globex'];
        // The same key strings in two tenants: two records, two bodies.
        const firsts = new Map<string, string>();
        for (const key of keys) for (const tenant of tenants) firsts.set(`${tenant}/${key}`, (await send(key, tenant, `batch-${tenant}-${key}`)).text);
        for (let i = 0; i < 3; i++) await send(keys[0], 'acme', `batch-acme-${keys[0]}`); // replays found by claims: reads first from here on

        const fresh = newKey();
        const answers = await Promise.all([
          ...keys.flatMap((key) => tenants.map(async (tenant) => ({ expected: firsts.get(`${tenant}/${key}`), answer: await send(key, tenant, `batch-${tenant}-${key}`) }))),
          send(keys[1], 'acme', 'batch-another-request').then((answer) => ({ expected: 422, answer })),
          send(fresh, 'acme', 'batch-fresh').then((answer) => ({ expected: 201, answer })),
        ]);
        for (const { expected, answer } of answers) {
          if (typeof expected === 'number') expect(answer.status).toBe(expected);
          else {
            expect(answer.headers['idempotent-replayed']).toBe('true');
            expect(answer.text).toBe(expected);
          }
        }
        expect(await entriesLabelled('batch-fresh')).toBe(1);
        expect(await entriesLabelled(`batch-globex-${keys[2]}`)).toBe(1);
      } finally {
        await cold.close();
      }
    });

    it('reads the records that keys asked for in one turn of the event loop with one statement', async () => {
      const cold = await startApp({ imports: ledgerAppModules(db.url, { ...driver.options, replayCacheSize: 0 }, driver.dataSource) }, { adapter });
      try {
        const keys = [newKey(), newKey()];
        for (const key of keys) await request(cold.url).post('/entries').set('Idempotency-Key', key).set('X-Tenant', 'acme').send({ label: 'one-statement' });
        const [{ scope, operation }] = await recordOf(keys[0]);
        // The second moved to a scope and key spelled with what an array literal reads as syntax: they must reach the statement intact.
        const hostile = { scope: 'a"b\\c,{NULL}', key: 'k"\\,{}' };
        await db.query(`UPDATE idempotency_records SET scope = $1, key = $2 WHERE key = $3`, [hostile.scope, hostile.key, keys[1]]);
        const likelihood = cold.app.get(ReplayLikelihood);
        for (let i = 0; i < 20; i++) likelihood.observe(operation, true);
        const pool = cold.app.get(DataSource).driver as unknown as { master: pg.Pool };
        const sent: string[] = [];
        // The reads go to a pooled client of their own: each client the pool hands out from now on counts the named statements it is sent.
        const connect = pool.master.connect.bind(pool.master) as () => Promise<pg.PoolClient>;
        pool.master.connect = (async () => {
          const client = await connect();
          const query = client.query.bind(client) as (...args: unknown[]) => unknown;
          client.query = ((statement: { name?: string }, ...rest: unknown[]) => {
            if (statement?.name) sent.push(statement.name);
            return query(statement, ...rest);
          }) as typeof client.query;
          return client;
        }) as typeof pool.master.connect;

        const [{ fingerprint }] = await db.query<{ fingerprint: string }>(`SELECT fingerprint FROM idempotency_records WHERE key = $1`, [keys[0]]);
        const fast = cold.app.get(FastReplay);
        const find = (inScope: string, key: string, asked = fingerprint) => fast.find({ scope: inScope, operation, key }, { value: asked, matches: (stored) => stored === asked, accepted: () => [asked] });
        const found = await Promise.allSettled([find(scope, keys[0]), find(scope, 'no-such-key'), find(hostile.scope, hostile.key, 'another-request'), find(scope, keys[0]), find(scope, keys[1])]);
        expect(sent).toEqual([expect.stringMatching(/^idempotency\.find-live\./)]);
        const [own, none, reused, again, moved] = found;
        expect(own).toMatchObject({ status: 'fulfilled', value: { replayed: true, outcome: { status: 201 } } });
        expect(again).toEqual(own);
        expect(none).toEqual({ status: 'fulfilled', value: undefined });
        expect(moved).toEqual({ status: 'fulfilled', value: undefined });
        expect(reused).toMatchObject({ status: 'rejected', reason: { status: 422 } });
      } finally {
        await cold.close();
      }
    });

    it('replays a record it did not cache from the claim that finds it', async () => {
      const key = newKey();
      const first = await post('/entries', key, { label: 'cold' });
      const cold = await startApp({ imports: ledgerAppModules(db.url, { ...driver.options, replayCacheSize: 0 }, driver.dataSource) }, { adapter });
      try {
        const replay = await request(cold.url).post('/entries').set('Idempotency-Key', key).set('X-Tenant', 'acme').send({ label: 'cold' });
        expect(replay.headers['idempotent-replayed']).toBe('true');
        expect(replay.text).toBe(first.text);
        expect((await request(cold.url).post('/entries').set('Idempotency-Key', key).set('X-Tenant', 'acme').send({ label: 'x' })).status).toBe(422);
      } finally {
        await cold.close();
      }
      expect(await entriesLabelled('cold')).toBe(1);
    });
  });

  describe('replayed shapes', () => {
    it('replays a text body with its content type', async () => {
      const key = newKey();
      const first = await post('/entries/text', key, { label: 'text' });
      const replay = await post('/entries/text', key, { label: 'text' });
      expect(first.text).toMatch(/^entry \d+$/);
      expect(replay.text).toBe(first.text);
      expect(replay.headers['content-type']).toBe(first.headers['content-type']);
    });

    it('records a text body with the request’s NUL character in it, which PostgreSQL’s text cannot hold, and replays the same bytes', async () => {
      const key = newKey();
      // As bytes: a Buffer of exactly what was sent.
      const send = () => post('/entries/echo', key, { label: 'nul', note: 'a\u0000b' }).responseType('blob');
      const first = await send();
      expect(first.status).toBe(201);
      expect((first.body as Buffer).toString()).toMatch(/^entry \d+: a\u0000b$/);
      const replay = await send();
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body).toEqual(first.body);
      expect(await entriesLabelled('nul')).toBe(1);
    });

    it('replays an empty 204', async () => {
      const key = newKey();
      const first = await post('/entries/empty', key, { label: 'empty' });
      const replay = await post('/entries/empty', key, { label: 'empty' });
      expect([first.status, replay.status]).toEqual([204, 204]);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(await entriesLabelled('empty')).toBe(1);
    });
  });
});

describe.each(HTTP_ADAPTERS)('IdempotencyModule configuration (%s)', (adapter) => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(LEDGER_SCHEMA);
  });
  afterAll(async () => db?.drop());

  @Injectable()
  class OptionsFactory {
    createIdempotencyOptions(): IdempotencyModuleOptions {
      return { headerName: 'X-Request-Key', tenant: tenantFromHeader };
    }
  }
  @Module({ providers: [OptionsFactory], exports: [OptionsFactory] })
  class OptionsModule {}

  it.each<[string, AsyncOptions]>([
    ['useFactory', { useFactory: () => ({ headerName: 'X-Request-Key', tenant: tenantFromHeader }) }],
    ['useClass', { useClass: OptionsFactory }],
    ['useExisting', { imports: [OptionsModule], useExisting: OptionsFactory }],
  ])('takes async options through %s', async (_case, asyncOptions) => {
    const [typeorm, , entries] = ledgerAppModules(db.url);
    const running = await startApp({ imports: [typeorm, IdempotencyModule.forRootAsync(asyncOptions), entries] }, { adapter });
    try {
      const key = `async-${_case}`;
      const send = (header: string) => request(running.url).post('/entries').set(header, key).set('X-Tenant', 'acme').send({ label: key });
      const first = await send('X-Request-Key');
      const replay = await send('X-Request-Key');
      expect(first.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect((await send('Idempotency-Key')).status).toBe(400);
    } finally {
      await running.close();
    }
  });

  it('works without named prepared statements, as under PgBouncer before 1.21 (preparedStatements: false)', async () => {
    const send = (app: RunningApp, path: string, key: string, label: string) =>
      Promise.resolve(request(app.url).post(path).set('Idempotency-Key', key).set('X-Tenant', 'acme').send({ label }));
    // The claim has been prepared on the connection by the time the handler looks.
    const named = await startApp({ imports: ledgerAppModules(db.url) }, { adapter });
    const unnamed = await startApp({ imports: ledgerAppModules(db.url, { preparedStatements: false, replayCacheSize: 0 }) }, { adapter });
    try {
      expect((await send(named, '/entries/prepared', 'prepared-named', 'prepared')).body.prepared).toContainEqual(expect.stringMatching(/^idempotency\.try-lock\./));

      const first = await send(unnamed, '/entries/prepared', 'prepared-off', 'unprepared');
      expect(first.status).toBe(201);
      expect(first.body.prepared).toEqual([]);
      const replay = await send(unnamed, '/entries/prepared', 'prepared-off', 'unprepared');
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(first.text);
      expect((await send(unnamed, '/entries/prepared', 'prepared-off', 'other')).status).toBe(422);

      // Two at once: one runs, the other waits on its lock and replays it; a recorded error, rolled back to the savepoint.
      const ledger = unnamed.app.get(Ledger);
      ledger.script.push({ delayMs: 300 });
      const owner = send(unnamed, '/entries/prepared', 'prepared-off-concurrent', 'unprepared-concurrent');
      await sleep(50);
      const duplicate = await send(unnamed, '/entries/prepared', 'prepared-off-concurrent', 'unprepared-concurrent');
      const answers = [await owner, duplicate];
      expect(answers.map((answer) => answer.status)).toEqual([201, 201]);
      expect(answers.filter((answer) => answer.headers['idempotent-replayed'] === 'true')).toHaveLength(1);
      expect(answers[1].text).toBe(answers[0].text);
      ledger.script.push({ fail: new HttpException('declined', 402) });
      const declined = await send(unnamed, '/entries', 'prepared-off-declined', 'unprepared-declined');
      expect(declined.status).toBe(402);
      expect((await send(unnamed, '/entries', 'prepared-off-declined', 'unprepared-declined')).text).toBe(declined.text);
      const rows = await db.query<{ label: string }>(`SELECT label FROM ledger_entries WHERE label LIKE 'unprepared%' ORDER BY label`);
      expect(rows.map((row) => row.label)).toEqual(['unprepared', 'unprepared-concurrent']);
    } finally {
      await Promise.all([named.close(), unnamed.close()]);
    }
  });

  it('replays from the cache only a request that matches the recorded one as it arrived, not as its handler left it', async () => {
    @Controller('rewriting')
    class RewritingController {
      @Post()
      @Idempotent()
      create(@Req() incoming: { body: { label: string } }) {
        incoming.body.label = 'rewritten'; // a handler that edits its input in place
        return { done: true };
      }
    }
    const [typeorm, idempotency] = ledgerAppModules(db.url);
    const running = await startApp({ imports: [typeorm, idempotency], controllers: [RewritingController] }, { adapter });
    try {
      const send = (label: string) => request(running.url).post('/rewriting').set('Idempotency-Key', 'rewriting').set('X-Tenant', 'acme').send({ label });
      expect((await send('original')).status).toBe(201);
      expect((await send('rewritten')).status).toBe(422);
      expect((await send('original')).headers['idempotent-replayed']).toBe('true');
    } finally {
      await running.close();
    }
  });

  describe('under PostgreSQL’s timeouts on the app’s connections', () => {
    const send = (app: RunningApp, key: string, label: string) =>
      Promise.resolve(request(app.url).post('/entries').set('Idempotency-Key', key).set('X-Tenant', 'acme').send({ label }));
    const entriesLabelled = async (label: string) => Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM ledger_entries WHERE label = $1`, [label]))[0].n);

    it('a duplicate gets 409 with Retry-After once a statement_timeout shorter than wait would cancel its wait, and its retry replays', async () => {
      const running = await startApp({ imports: ledgerAppModules(db.url, { wait: 5000 }, { extra: { options: '-c statement_timeout=300' } }) }, { adapter });
      try {
        const ledger = running.app.get(Ledger);
        const label = `statement-timeout-${adapter}`;
        ledger.script.push({ delayMs: 1200 });
        const calls = ledger.calls;
        const owner = send(running, label, label);
        await vi.waitFor(() => expect(ledger.calls).toBeGreaterThan(calls), { timeout: 10_000, interval: 5 });
        const duplicate = await send(running, label, label);
        // Retry-After as when wait runs out: the owner may hold the key that long.
        expect([duplicate.status, duplicate.headers['retry-after']]).toEqual([409, '5']);
        expect(duplicate.body).toMatchObject({ type: 'urn:nest-idempotency:problem:request-in-progress' });
        expect((await owner).status).toBe(201);
        expect((await send(running, label, label)).headers['idempotent-replayed']).toBe('true');
        expect(await entriesLabelled(label)).toBe(1);
      } finally {
        await running.close();
      }
    });

    it('a request whose session idle_in_transaction_session_timeout ends gets 503 naming it, nothing is recorded, and its retry runs', async () => {
      // Express drives the claim on the pg client, which hears the server end the session; Fastify through TypeORM's
      // API, which cannot tell, so the handler's time is compared with the setting read at startup.
      const driver = CLAIM_DRIVERS[HTTP_ADAPTERS.indexOf(adapter)];
      const extra = { ...driver.dataSource.extra, options: '-c idle_in_transaction_session_timeout=300' };
      const running = await startApp({ imports: ledgerAppModules(db.url, driver.options, { ...driver.dataSource, extra }) }, { adapter });
      try {
        const label = `idle-timeout-${adapter}`;
        running.app.get(Ledger).script.push({ delayMs: 800 });
        const cut = await send(running, label, label);
        expect([cut.status, cut.headers['retry-after']]).toEqual([503, '1']);
        expect(cut.body).toMatchObject({ type: 'urn:nest-idempotency:problem:database-unavailable' });
        expect(cut.body.detail).toContain('idle_in_transaction_session_timeout (300ms)');
        expect(cut.body.detail).toContain('@Idempotent({ phases: true })');
        expect(await db.query(`SELECT key FROM idempotency_records WHERE key = $1`, [label])).toEqual([]);
        expect((await send(running, label, label)).status).toBe(201);
        expect(await entriesLabelled(label)).toBe(1);
      } finally {
        await running.close();
      }
    });
  });

  it('refuses at startup a handler that writes the response itself', async () => {
    @Controller('raw')
    class RawController {
      @Post()
      @Idempotent()
      create(@Res() response: { send(body: string): void }) {
        response.send('done');
      }
    }
    const [typeorm, idempotency] = ledgerAppModules(db.url);
    const moduleRef = await Test.createTestingModule({ imports: [typeorm, idempotency], controllers: [RawController] }).compile();
    const app = moduleRef.createNestApplication({ logger: false });
    await expect(app.init()).rejects.toThrow(IdempotencyConfigurationError);
    await app.close();
  });

  it('refuses at startup to record 5xx outcomes', async () => {
    @Controller('flaky')
    class FlakyController {
      @Post()
      @Idempotent({ storeErrors: [503] })
      create() {
        return {};
      }
    }
    const [typeorm, idempotency] = ledgerAppModules(db.url);
    const moduleRef = await Test.createTestingModule({ imports: [typeorm, idempotency], controllers: [FlakyController] }).compile();
    const app = moduleRef.createNestApplication({ logger: false });
    await expect(app.init()).rejects.toThrow(/storeErrors may list 4xx statuses only/);
    await app.close();
  });
});
