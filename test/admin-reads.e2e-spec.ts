import { type ExecutionContext, UnauthorizedException } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import pg from 'pg';
import request from 'supertest';
import { AdminProblemType, IdempotencyAdminModule, type IdempotencyAdminOptions, tenantScope } from '../src/idempotency/admin/index.js';
import { KEY_SEARCH_WINDOW } from '../src/idempotency/admin/admin.statements.js';
import { HTTP_ADAPTERS, startApp, type RunningApp } from './support/http-app.js';
import { LEDGER_SCHEMA, ledgerAppModules } from './support/ledger-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

const ADMIN = '/ops/idempotency';
const OPERATORS: Record<string, 'all' | string[]> = { root: 'all', 'acme-support': [tenantScope('acme')] };

/** The ledger on a pool of three connections, and the admin behind `X-Operator`, its statements bounded. */
function boundedAdminApp(url: string, pool: number, admin: Partial<IdempotencyAdminOptions> = {}) {
  return [
    ...ledgerAppModules(url, { reaper: false }, { extra: { max: pool } }),
    IdempotencyAdminModule.forRoot({
      path: ADMIN,
      guard: (context: ExecutionContext) => {
        if (context.switchToHttp().getRequest().headers['x-operator'] in OPERATORS) return true;
        throw new UnauthorizedException();
      },
      scopes: (request: { headers: Record<string, string> }) => OPERATORS[request.headers['x-operator']],
      actor: (request: { headers: Record<string, string> }) => request.headers['x-operator'],
      ...admin,
    }),
  ];
}

describe.each(HTTP_ADAPTERS)('bounded admin reads (%s)', (adapter) => {
  let db: TestDatabase;
  let app: RunningApp;
  let locker: pg.Client;

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(LEDGER_SCHEMA);
    app = await startApp({ imports: boundedAdminApp(db.url, 3, { statementTimeout: 1_500 }) }, { adapter });
    locker = new pg.Client({ connectionString: db.url });
    await locker.connect();
  });
  afterAll(async () => {
    await locker?.end();
    await app?.close();
    await db?.drop();
  });

  const read = (path: string, query: Record<string, string> = {}, operator = 'root') =>
    request(app.url).get(`${ADMIN}/api/${path}`).query(query).set('X-Operator', operator).timeout(5_000);

  /** Holds the outbox locked, so that the admin's reads of it wait, until `release()`. */
  async function lockOutbox() {
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE idempotency_outbox IN ACCESS EXCLUSIVE MODE');
    return { release: () => locker.query('ROLLBACK') };
  }

  it('cancels a statement past statementTimeout and answers 503 admin-timeout', async () => {
    const lock = await lockOutbox();
    try {
      const started = Date.now();
      const response = await read('outbox', { state: 'dead' }).expect(503);
      expect(response.body.type).toBe(AdminProblemType.Timeout);
      expect(Date.now() - started).toBeLessThan(4_000);
    } finally {
      await lock.release();
    }
    await read('outbox', { state: 'dead' }).expect(200);
  });

  it('holds one connection of the app\'s pool however many admin reads wait, so the app keeps answering', async () => {
    const lock = await lockOutbox();
    const reads = Array.from({ length: 4 }, () => read('outbox', { state: 'pending' }).then((response) => response.status));
    try {
      // Four reads waiting would hold every connection of the pool of three, and this request would wait with them.
      await request(app.url).post('/entries').set('Idempotency-Key', `during-reads-${adapter}`).set('X-Tenant', 'acme').send({ label: 'served' }).timeout(1_000).expect(201);
    } finally {
      await lock.release();
    }
    expect(await Promise.all(reads)).toEqual([200, 200, 200, 200]);
  });

  it('walks a window of scopes per page when it searches a key in every scope, and says so', async () => {
    // Scopes after the test's other records, in order: the key in the first two and in one past the window.
    await db.query(
      `INSERT INTO idempotency_records (scope, operation, key, fingerprint, status, response_status, response_headers, response_body, created_at, completed_at, expires_at)
       SELECT 'tenant:w' || lpad(g::text, 6, '0'), 'POST /entries', CASE WHEN g IN (1, 2, $1) THEN 'needle' ELSE 'hay' END, 'f', 'completed', 201, '{}', '',
              now() - g * interval '1 second', now(), now() + interval '1 day'
         FROM generate_series(1, $1) AS g`,
      [KEY_SEARCH_WINDOW + 3],
    );
    const scopeOf = (response: request.Response) => response.body.items.map((record: { scope: string }) => record.scope);
    const first = await read('records', { key: 'needle', limit: '1' }).expect(200);
    expect(first.body).toMatchObject({ items: [{ scope: 'tenant:w000001' }], next: expect.any(String) });
    expect(first.body.partial).toBeUndefined();
    const second = await read('records', { key: 'needle', limit: '1', cursor: first.body.next }).expect(200);
    expect(second.body).toMatchObject({ items: [{ scope: 'tenant:w000002' }], partial: true, next: expect.any(String) });
    const third = await read('records', { key: 'needle', limit: '1', cursor: second.body.next }).expect(200);
    expect(scopeOf(third)).toEqual([`tenant:w${String(KEY_SEARCH_WINDOW + 3).padStart(6, '0')}`]);
    expect(third.body.next).toBeUndefined();

    const page = await request(app.url).get(ADMIN).query({ key: 'needle' }).set('X-Operator', 'root').expect(200);
    expect(page.text).toContain('The search stopped early');
    // A caller's own scopes are looked up one by one, never walked.
    expect((await read('records', { key: 'needle' }, 'acme-support').expect(200)).body).toEqual({ items: [] });
  });
});

describe('the admin on a pool it could fill', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('refuses to start, saying to give it fewer connections or the pool more', async () => {
    const app = (await Test.createTestingModule({ imports: boundedAdminApp(db.url, 2, { connections: 2 }) }).compile()).createNestApplication({ logger: false });
    await expect(app.init()).rejects.toThrow(/`connections` \(2\) would let the admin hold every connection of the app's pool \(2\).*Give it fewer/s);
    await app.close();
  });
});
