import multipart from '@fastify/multipart';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { Logger } from '@nestjs/common';
import request from 'supertest';
import { IdempotencyModule } from '../src/idempotency/index.js';
import { IdempotencyOutboxModule } from '../src/idempotency/outbox/index.js';
import { HTTP_ADAPTERS, startApp, type RunningApp } from './support/http-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { USER_ROWS_SCHEMA, userCodeModules } from './support/user-code-app.js';

/**
 * `unitSavepoints: false`, the opt-in that sends no savepoint per unit of
 * the handler's: what still behaves as without the module, and what fails
 * instead, loudly and with nothing committed, where only a savepoint could
 * have kept a caught failure local.
 */
describe.each(HTTP_ADAPTERS)('unitSavepoints: false (%s)', (adapter) => {
  let db: TestDatabase;
  let app: RunningApp;
  let seq = 0;
  const unique = (label: string) => `${label}-${adapter}-${++seq}-${Date.now()}`;
  const post = (path: string, key: string, body: object) => Promise.resolve(request(app.url).post(`/user-code/${path}`).set('Idempotency-Key', key).send(body));
  const rowsLabelled = async (pattern: string) => (await db.query<{ label: string }>(`SELECT label FROM user_rows WHERE label LIKE $1 ORDER BY label`, [pattern])).map((row) => row.label);
  const records = async (key: string) => (await db.query<{ key: string }>(`SELECT key FROM idempotency_records WHERE key = $1`, [key])).length;

  beforeAll(async () => {
    db = await createTestDatabase();
    app = await startApp({ imports: userCodeModules(db.url, adapter, 4, [IdempotencyModule.forRoot({ tenant: 'shared', reaper: false, unitSavepoints: false }), IdempotencyOutboxModule.forRoot({})]) }, {
      adapter,
      configure: (started) => adapter === 'fastify' && void (started as NestFastifyApplication).register(multipart),
    });
    await db.query(USER_ROWS_SCHEMA);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('records and replays a handler whose writes all succeed', async () => {
    const label = unique('plain');
    const first = await post('charge', label, { label });
    expect(first.status).toBe(201);
    const replay = await post('charge', label, { label });
    expect([replay.status, replay.headers['idempotent-replayed'], replay.text]).toEqual([201, 'true', first.text]);
    expect(await rowsLabelled(label)).toEqual([label]);
  });

  it('answers 500 and commits nothing when the handler catches a failed write and carries on, every attempt', async () => {
    const label = unique('caught');
    await db.query(`INSERT INTO user_rows (label) VALUES ($1)`, [label]);
    for (let attempt = 0; attempt < 2; attempt++) {
      const answer = await post('catch', label, { label });
      expect(answer.status).toBe(500);
      expect(answer.headers['idempotent-replayed']).toBeUndefined();
    }
    expect(await rowsLabelled(`${label}%`)).toEqual([label]);
    expect(await records(label)).toBe(0);
  });

  it('keeps a failure caught inside a dataSource.transaction() callback local, with TypeORM’s own savepoint', async () => {
    const label = unique('caught-inside');
    await db.query(`INSERT INTO user_rows (label) VALUES ($1)`, [label]);
    const answer = await post('units/caught-inside', label, { label });
    expect([answer.status, answer.body]).toEqual([201, { caught: 'caught' }]);
    expect(await rowsLabelled(`${label}%`)).toEqual([label, `${label}:after`]);
  });
});

/**
 * The default: a savepoint per unit. Past 64 in one transaction, PostgreSQL's
 * snapshots overflow their subtransaction cache; the module says so, once,
 * with what to do.
 */
describe('unit savepoints past the subtransaction cache (default options)', () => {
  let db: TestDatabase;
  let app: RunningApp;

  beforeAll(async () => {
    db = await createTestDatabase();
    app = await startApp({ imports: userCodeModules(db.url, 'express', 4, [IdempotencyModule.forRoot({ tenant: 'shared', reaper: false }), IdempotencyOutboxModule.forRoot({})]) });
    await db.query(USER_ROWS_SCHEMA);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('warns once when a request takes more than 64 savepoints, naming the ways out, and not below that', async () => {
    const warn = vi.spyOn(Logger.prototype, 'warn');
    const overflowWarnings = () => warn.mock.calls.filter(([message]) => String(message).includes('more than 64 savepoints'));
    try {
      const post = (key: string, count: number) => Promise.resolve(request(app.url).post('/user-code/row-by-row').set('Idempotency-Key', key).send({ label: key, count }));
      expect((await post(`under-${Date.now()}`, 64)).status).toBe(201);
      expect(overflowWarnings()).toEqual([]);
      for (const count of [65, 80]) expect((await post(`over-${count}-${Date.now()}`, count)).status).toBe(201);
      expect(overflowWarnings()).toHaveLength(1);
      expect(String(overflowWarnings()[0][0])).toMatch(/unitSavepoints: false/);
    } finally {
      warn.mockRestore();
    }
  });
});
