import { Test } from '@nestjs/testing';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import pg from 'pg';
import { Registry } from 'prom-client';
import request from 'supertest';
import { setTimeout as sleep } from 'node:timers/promises';
import { type AdminActionEvent, IdempotencyEvents, IdempotencyProblemType } from '../src/idempotency/index.js';
import { AdminProblemType, IdempotencyAdminModule, tenantScope } from '../src/idempotency/admin/index.js';
import { SEARCH_WINDOW } from '../src/idempotency/admin/admin.statements.js';
import { ADMIN, adminAppModules } from './support/admin-app.js';
import { HTTP_ADAPTERS, startApp, type RunningApp } from './support/http-app.js';
import { LEDGER_SCHEMA, ledgerAppModules, NotifyGate } from './support/ledger-app.js';
import { RecordingPublisher } from './support/outbox-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

const ACME = tenantScope('acme');
const ENTRIES = 'POST /entries';
const TRANSFERS = 'POST /entries/transfers';

async function until(condition: () => Promise<boolean> | boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(25);
  }
}

describe.each(HTTP_ADAPTERS)('the admin (%s)', (adapter) => {
  let db: TestDatabase;
  let app: RunningApp;
  let publisher: RecordingPublisher;
  let registry: Registry;
  let gate: NotifyGate;
  const events: AdminActionEvent[] = [];
  let keys = 0;
  const newKey = (label: string) => `${label}-${adapter}-${++keys}`;

  const entry = (key: string, label: string, tenant = 'acme', url = app.url) =>
    request(url).post('/entries').set('Idempotency-Key', key).set('X-Tenant', tenant).send({ label });
  const transfer = (key: string, label: string) => Promise.resolve(request(app.url).post('/entries/transfers').set('Idempotency-Key', key).set('X-Tenant', 'acme').send({ label }));
  const read = (path: string, query: Record<string, string> = {}, operator = 'root') => request(app.url).get(`${ADMIN}/api/${path}`).query(query).set('X-Operator', operator);
  const act = (action: string, body: object, operator = 'root', url = app.url) => request(url).post(`${ADMIN}/api/${action}`).set('X-Operator', operator).send(body);
  const id = (key: string, operation = ENTRIES, scope = ACME) => ({ scope, operation, key });
  const databaseNow = async () => (await db.query<{ now: Date }>('SELECT now()'))[0].now;

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(LEDGER_SCHEMA);
    publisher = new RecordingPublisher();
    registry = new Registry();
    app = await startApp({ imports: adminAppModules(db.url, publisher, registry) }, { adapter });
    gate = app.app.get(NotifyGate);
    app.app.get(IdempotencyEvents).subscribe((event) => event.kind === 'admin_action' && events.push(event));
  });
  beforeEach(() => {
    gate.mode = 'pass';
  });
  afterAll(async () => {
    gate?.release();
    await app?.close();
    await db?.drop();
  });

  it('finds records by tenant, operation, key, status and time, newest first, a page at a time, and shows one with its answer', async () => {
    const since = await databaseNow();
    const created = [];
    for (const label of ['a', 'b', 'c']) created.push(newKey(`find-${label}`));
    for (const key of created) await entry(key, key).expect(201);
    const shared = newKey('shared');
    await entry(shared, 'acme', 'acme').expect(201);
    await entry(shared, 'globex', 'globex').expect(201);

    const byKey = await read('records', { key: shared }).expect(200);
    expect(byKey.body.items.map((record: { scope: string }) => record.scope)).toEqual([tenantScope('globex'), ACME]);
    const first = await read('records', { scope: ACME, operation: ENTRIES, since: since.toISOString(), limit: '2' }).expect(200);
    expect(first.body.items.map((record: { key: string }) => record.key)).toEqual([shared, created[2]]);
    const second = await read('records', { scope: ACME, operation: ENTRIES, since: since.toISOString(), limit: '2', cursor: first.body.next }).expect(200);
    expect(second.body.items.map((record: { key: string }) => record.key)).toEqual([created[1], created[0]]);
    expect(second.body.next).toBeUndefined();
    expect((await read('records', { scope: ACME, since: since.toISOString(), status: 'failed' }).expect(200)).body.items).toEqual([]);
    expect((await read('records', { scope: ACME, until: since.toISOString(), key: created[0] }).expect(200)).body.items).toEqual([]);

    const replayed = await entry(created[1], created[1]).expect(201);
    const detail = await read('record', id(created[1])).expect(200);
    expect(detail.body).toMatchObject({ ...id(created[1]), status: 'completed', responseStatus: 201, expired: false, answer: { status: 201, body: replayed.text, sealed: false } });
    expect(detail.body.fingerprint).toMatch(/^[0-9a-f]{64}$/);
    await read('record', id('no-such-key')).expect(404);
    await read('records', { since: 'yesterday' }).expect(400);
  });

  it('looks for a status among a window of claims per page, and carries on with older ones', async () => {
    const scope = tenantScope(`window-${adapter}`);
    // One failed record, older than a window's worth of completed ones.
    await db.query(
      `INSERT INTO idempotency_records (scope, operation, key, fingerprint, status, response_status, response_headers, response_body, created_at, completed_at, expires_at)
       SELECT $1, 'POST /entries', 'k-' || g, 'f', CASE WHEN g = 0 THEN 'failed' ELSE 'completed' END, 500, '{}', '', now() + g * interval '1 ms', now(), now() + interval '1 day'
         FROM generate_series(0, ${SEARCH_WINDOW}) AS g`,
      [scope],
    );
    const first = (await read('records', { scope, status: 'failed' }).expect(200)).body;
    expect(first).toMatchObject({ items: [], partial: true, next: expect.any(String) });
    const second = (await read('records', { scope, status: 'failed', cursor: first.next }).expect(200)).body;
    expect(second.items.map((record: { key: string }) => record.key)).toEqual(['k-0']);
    expect(second.next).toBeUndefined();
  });

  it('refuses a tenant the caller may not see: its records, its actions, and the outbox, which names no tenant', async () => {
    const key = newKey('globex-only');
    await entry(key, 'g', 'globex').expect(201);
    const forbidden = async (response: request.Test) => expect((await response.expect(403)).body.type).toBe(AdminProblemType.ScopeForbidden);
    await forbidden(read('records', { scope: tenantScope('globex') }, 'acme-support'));
    await forbidden(read('record', id(key, ENTRIES, tenantScope('globex')), 'acme-support'));
    await forbidden(act('release', { ...id(key, ENTRIES, tenantScope('globex')), reason: 'curious' }, 'acme-support'));
    await forbidden(read('outbox', { state: 'dead' }, 'acme-support'));
    await forbidden(act('requeue', { all: true, reason: 'curious' }, 'acme-support'));
    expect((await read('records', { key }, 'acme-support').expect(200)).body.items).toEqual([]);
    expect((await read('records', { key }).expect(200)).body.items).toHaveLength(1);
    expect(events).toContainEqual(expect.objectContaining({ action: 'release', result: 'refused', actor: 'acme-support', reason: 'curious', refusal: AdminProblemType.ScopeForbidden }));
  });

  it('releases a finished key, so that a corrected request runs anew, with who and why in its event and metric', async () => {
    const key = newKey('release');
    const wrong = await entry(key, 'wrong address').expect(201);
    expect((await entry(key, 'wrong address').expect(201)).headers['idempotent-replayed']).toBe('true'); // now in the replay cache
    expect((await entry(key, 'right address')).status).toBe(422);

    const released = await act('release', { ...id(key), reason: 'customer corrects the address' }).expect(200);
    expect(released.body).toMatchObject({ action: 'release', actor: 'root', reason: 'customer corrects the address', record: id(key), effects: { external: false } });
    expect(released.body.forced).toBeUndefined();
    const corrected = await entry(key, 'right address').expect(201);
    expect(corrected.headers['idempotent-replayed']).toBeUndefined();
    expect(corrected.body.entry).not.toBe(wrong.body.entry);
    expect(events).toContainEqual({ kind: 'admin_action', action: 'release', result: 'done', actor: 'root', reason: 'customer corrects the address', operation: ENTRIES, keyHash: released.body.record.keyHash });
    expect(await registry.metrics()).toMatch(/idempotency_admin_actions_total\{action="release",result="done"\} [1-9]/);
    await act('release', { ...id(key) }).expect(400);
  });

  it('tells another instance of a release, which then drops the key from its replay cache', async () => {
    const other = await startApp({ imports: adminAppModules(db.url, new RecordingPublisher(), new Registry()) }, { adapter });
    try {
      const key = newKey('elsewhere');
      await entry(key, 'first', 'acme', other.url).expect(201);
      expect((await entry(key, 'first', 'acme', other.url).expect(201)).headers['idempotent-replayed']).toBe('true');
      await act('release', { ...id(key), reason: 'retry with the second body' }).expect(200);
      // The announcement reaches the other instance at commit, asynchronously: until then it answers from its cache.
      await until(async () => (await entry(key, 'second', 'acme', other.url)).status === 201, 10_000);
    } finally {
      await other.close();
    }
  });

  it('refuses to release or fail a live lease, to release a started operation or a key a transaction holds, and releases an unstarted abandoned claim', async () => {
    gate.mode = 'hold';
    const held = newKey('held');
    const running = transfer(held, 'held');
    await until(() => gate.heldCount === 1);
    expect((await act('release', { ...id(held, TRANSFERS), reason: 'stuck?' }).expect(409)).body.type).toBe(AdminProblemType.LeaseLive);
    expect((await act('release', { ...id(held, TRANSFERS), force: true, reason: 'stuck?' }).expect(409)).body.type).toBe(AdminProblemType.LeaseLive);
    expect((await act('fail', { ...id(held, TRANSFERS), reason: 'stuck?' }).expect(409)).body.type).toBe(AdminProblemType.LeaseLive);
    gate.release();
    expect((await running).status).toBe(201);

    gate.mode = 'fail';
    const started = newKey('started');
    expect((await transfer(started, 'started')).status).toBe(503);
    const refusal = await act('release', { ...id(started, TRANSFERS), reason: 'retry it' }).expect(409);
    expect(refusal.body).toMatchObject({ type: AdminProblemType.OperationStarted, detail: expect.stringContaining('ledger-transfer') });

    const locked = newKey('locked');
    await entry(locked, 'locked').expect(201);
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM idempotency_records WHERE key = $1 FOR UPDATE`, [locked]);
      expect((await act('release', { ...id(locked), reason: 'while held' }).expect(409)).body.type).toBe(AdminProblemType.KeyInUse);
      await holder.query('ROLLBACK');
    } finally {
      await holder.end();
    }
    await act('release', { ...id(locked), reason: 'once free' }).expect(200);
    expect((await act('release', { ...id(locked), reason: 'twice' }).expect(404)).body.type).toBe(AdminProblemType.NotFound);

    const unstarted = newKey('unstarted');
    await db.query(
      `INSERT INTO idempotency_records (scope, operation, key, fingerprint, status, expires_at, owner_token, lease_expires_at)
       VALUES ($1, $2, $3, 'f', 'in_progress', now() + interval '1 day', gen_random_uuid(), now() - interval '1 second')`,
      [ACME, TRANSFERS, unstarted],
    );
    await act('release', { ...id(unstarted, TRANSFERS), reason: 'its owner died before it started' }).expect(200);
  });

  it('lists unfinished operations with their phase, lease, owner and attempts, and marks one failed, which every retry then answers until a forced release', async () => {
    gate.mode = 'fail';
    const key = newKey('abandoned');
    expect((await transfer(key, 'abandoned')).status).toBe(503);
    const listed = (await read('unfinished', { scope: ACME, operation: TRANSFERS }).expect(200)).body.items.find((item: { key: string }) => item.key === key);
    expect(listed).toMatchObject({ state: 'abandoned', resumes: 'ledger-transfer', registeredHere: true, recoveryPoint: 'debit', phases: ['debit'], attempts: 1, leaseLive: false });
    expect(listed.ownerToken).toMatch(/^[0-9a-f-]{36}$/);

    const finished = newKey('finished');
    await entry(finished, 'done').expect(201);
    expect((await act('fail', { ...id(finished), reason: 'wrong one' }).expect(409)).body.type).toBe(AdminProblemType.NotUnfinished);

    await act('fail', { ...id(key, TRANSFERS), reason: 'the peer lost the request; refunded by hand' }).expect(200);
    gate.mode = 'pass';
    const retry = await transfer(key, 'abandoned');
    expect(retry.status).toBe(500);
    expect(retry.body.type).toBe(IdempotencyProblemType.OperationFailed);
    expect(JSON.stringify(retry.body)).not.toContain('refunded by hand');
    const detail = (await read('record', id(key, TRANSFERS)).expect(200)).body;
    expect(detail).toMatchObject({ status: 'failed', failureReason: expect.stringContaining('marked failed by root at recovery point debit: the peer lost the request; refunded by hand') });
    expect((await read('unfinished', { scope: ACME }).expect(200)).body.items.map((item: { key: string }) => item.key)).not.toContain(key);

    // Failed, its debit and its notification to the peer stay: a release would run them again, so it needs force.
    const refused = await act('release', { ...id(key, TRANSFERS), reason: 'customer may try again' }).expect(409);
    expect(refused.body).toMatchObject({ type: AdminProblemType.OperationStarted, detail: expect.stringContaining('finished phases debit') });
    expect(refused.body.detail).not.toMatch(/fail[^.]*then release/i);
    expect((await transfer(key, 'abandoned')).status).toBe(500);
    const forced = await act('release', { ...id(key, TRANSFERS), force: true, reason: 'debit reversed by hand' }).expect(200);
    expect(forced.body).toMatchObject({ forced: true, effects: { operation: 'ledger-transfer', phases: ['debit'], external: true } });
    expect(events).toContainEqual(expect.objectContaining({ action: 'release', result: 'done', forced: true, reason: 'debit reversed by hand' }));
    expect((await transfer(key, 'abandoned')).status).toBe(201);
  });

  it('requeues dead letters oldest first within their key, refusing one that would leave an older one dead, and what is not a dead letter', async () => {
    publisher.rejections.set('poison', Infinity);
    await request(app.url)
      .post('/eventful')
      .set('Idempotency-Key', newKey('dead'))
      .set('X-Tenant', 'acme')
      .send({ label: 'dead', events: [{ type: 'poison', key: `P-${adapter}` }, { type: 'poison', key: `P-${adapter}` }, { type: 'fine' }] })
      .expect(201);
    const dead = async () => (await read('outbox', { state: 'dead' }).expect(200)).body.items as Array<{ id: string; seq: string; orderingKey: string; attempts: number; lastError: string }>;
    await until(async () => (await dead()).filter((event) => event.orderingKey === `P-${adapter}`).length === 2);
    await until(() => publisher.published.some((message) => message.type === 'fine'));
    const [older, newer] = (await dead()).filter((event) => event.orderingKey === `P-${adapter}`);
    expect(older).toMatchObject({ attempts: 2, lastError: 'rejected poison (test)' });
    expect(BigInt(older.seq)).toBeLessThan(BigInt(newer.seq));

    const outOfOrder = await act('requeue', { ids: [newer.id], reason: 'broker fixed' }).expect(409);
    expect(outOfOrder.body).toMatchObject({ type: AdminProblemType.OutOfOrder, detail: expect.stringContaining(older.id) });
    const fine = publisher.published.find((message) => message.type === 'fine')!;
    expect((await act('requeue', { ids: [fine.id], reason: 'again' }).expect(409)).body.type).toBe(AdminProblemType.NotDead);
    await act('requeue', { ids: ['00000000-0000-4000-8000-000000000000'], reason: 'no such' }).expect(404);
    const before = events.length;
    await act('requeue', { ids: ['not-an-id'], reason: 'no such' }).expect(400);
    expect(events.length).toBe(before); // refused before an event could name it

    publisher.rejections.delete('poison');
    const requeued = await act('requeue', { ids: [newer.id, older.id], reason: 'broker fixed' }).expect(200);
    expect(requeued.body.eventIds).toEqual([older.id, newer.id]);
    await until(() => publisher.published.filter((message) => message.type === 'poison').length === 2);
    expect(publisher.published.filter((message) => message.type === 'poison').map((message) => message.id)).toEqual([older.id, newer.id]);
    expect(events).toContainEqual(expect.objectContaining({ action: 'requeue', result: 'done', eventIds: [older.id, newer.id], reason: 'broker fixed' }));
  });

  it('takes actions only through the guard, as JSON, from its own origin', async () => {
    await request(app.url).get(`${ADMIN}/api/records`).expect(401);
    await request(app.url).get(`${ADMIN}/api/records`).set('X-Operator', 'stranger').expect(401);
    const body = { ...id('any'), reason: 'x' };
    await act('release', body).set('Origin', 'https://elsewhere.example').expect(403);
    await act('release', body).set('Sec-Fetch-Site', 'cross-site').expect(403);
    await request(app.url).post(`${ADMIN}/api/release`).set('X-Operator', 'root').type('form').send(body).expect(415);
  });

  it('serves a page that reads without JavaScript and escapes what a record holds', async () => {
    const key = newKey('<script>alert(1)</script>');
    await entry(key, '<b>bold</b>').expect(201);
    const page = await request(app.url).get(ADMIN).query({ key }).set('X-Operator', 'root').expect(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.headers['content-security-policy']).toContain("script-src 'self'");
    expect(page.text).toContain('&#60;script&#62;alert(1)&#60;/script&#62;');
    expect(page.text).not.toContain('<script>alert');
    const detail = await request(app.url).get(`${ADMIN}/record`).query(id(key)).set('X-Operator', 'root').expect(200);
    const fingerprint = (await read('record', id(key))).body.fingerprint;
    expect(detail.text).toContain(fingerprint);
    expect(detail.text).toContain('&#60;b&#62;bold&#60;/b&#62;');
    expect(detail.text).toContain('Release key');
    const refused = await request(app.url).get(`${ADMIN}/record`).query(id(key, ENTRIES, tenantScope('globex'))).set('X-Operator', 'acme-support').expect(403);
    expect(refused.text).toContain('Scope not visible to this caller');
    expect((await request(app.url).get(`${ADMIN}/assets/admin.js`).set('X-Operator', 'root').expect(200)).text).toContain("addEventListener('submit'");
  });

  it('lists the finished phases of a run in the order they ran, where jsonb keeps its own', async () => {
    const key = newKey('in-order');
    expect((await transfer(key, 'in-order')).status).toBe(201);
    const detail = (await read('record', id(key, TRANSFERS)).expect(200)).body;
    // debit, notify, credit: jsonb orders phase_results' keys debit, credit, notify.
    expect(detail.effects.phases).toEqual(['debit', 'notify', 'credit']);
    const page = await request(app.url).get(`${ADMIN}/record`).query(id(key, TRANSFERS)).set('X-Operator', 'root').expect(200);
    expect(page.text).toContain('finished, in order: debit, notify, credit');
  });

  it('offers no action to a caller its actor names nobody for, and says why', async () => {
    const key = newKey('reader');
    await entry(key, 'read only').expect(201);
    const detail = await request(app.url).get(`${ADMIN}/record`).query(id(key)).set('X-Operator', 'reader').expect(200);
    expect(detail.text).not.toContain('Release key');
    expect(detail.text).toContain('Actions need a name for their audit line');
    expect(detail.text).toContain('no name: reading only');
    expect((await act('release', { ...id(key), reason: 'x' }, 'reader')).status).toBe(400);
  });

  it('lands a release on a page that says what was released', async () => {
    const key = newKey('landing');
    await entry(key, 'to release').expect(201);
    const landing = await request(app.url).get(ADMIN).query({ ...id(key), released: 'true' }).set('X-Operator', 'root').expect(200);
    expect(landing.text).toContain(`Released key ${key} of`);
  });

  it('documents its JSON API in OpenAPI, and leaves the page out', () => {
    const document = SwaggerModule.createDocument(app.app, new DocumentBuilder().build());
    expect(Object.keys(document.paths['/ops/idempotency/api/records'])).toEqual(['get']);
    expect(document.paths['/ops/idempotency/api/release'].post!.responses).toHaveProperty('409');
    expect(document.paths['/ops/idempotency/api/release'].post!.requestBody).toBeDefined();
    expect(document.paths['/ops/idempotency']).toBeUndefined();
  });
});

describe('the admin module without a guard', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('refuses to start, saying how to give it one', async () => {
    const compiling = Test.createTestingModule({ imports: [...ledgerAppModules(db.url, { reaper: false }), IdempotencyAdminModule.forRoot({ path: 'admin' } as never)] }).compile();
    await expect(compiling).rejects.toThrow(/refuses to start without a guard.*Pass `guard`/s);
  });
});
