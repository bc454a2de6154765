import type { LoggerService } from '@nestjs/common';
import { Registry } from 'prom-client';
import request from 'supertest';
import { AdminProblemType, tenantScope } from '../src/idempotency/admin/index.js';
import { ADMIN, adminAppModules } from './support/admin-app.js';
import { HTTP_ADAPTERS, startApp, type RunningApp } from './support/http-app.js';
import { LEDGER_SCHEMA } from './support/ledger-app.js';
import { RecordingPublisher } from './support/outbox-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

/** Keeps what the app logs as errors: an input PostgreSQL refused used to leave its stack and SQL there. */
class ErrorLog implements LoggerService {
  readonly errors: string[] = [];
  log(): void {}
  warn(): void {}
  error(message: unknown): void {
    this.errors.push(String(message));
  }
}

const cursorOf = (parts: unknown[]) => Buffer.from(JSON.stringify(parts)).toString('base64url');
const ACME = tenantScope('acme');

describe.each(HTTP_ADAPTERS)('admin inputs PostgreSQL cannot take (%s)', (adapter) => {
  let db: TestDatabase;
  let app: RunningApp;
  const log = new ErrorLog();

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(LEDGER_SCHEMA);
    app = await startApp({ imports: adminAppModules(db.url, new RecordingPublisher(), new Registry()) }, { adapter, logger: log });
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  const read = (path: string, query: Record<string, string>) => request(app.url).get(`${ADMIN}/api/${path}`).query(query).set('X-Operator', 'root');

  it.each([
    ['a NUL in a scope', 'records', { scope: 'tenant:acme\u0000' }],
    ['a NUL in a key', 'records', { key: 'order\u0000' }],
    ['a NUL in an operation', 'unfinished', { operation: 'POST /entries\u0000' }],
    ['a NUL in a record id', 'record', { scope: ACME, operation: 'POST /entries', key: '\u0000' }],
    ['an instant before any timestamptz', 'records', { since: '-271821-04-20T00:00:00Z' }],
    ['a cursor at a date Date.parse takes and timestamptz refuses', 'records', { cursor: cursorOf(['2020', ACME, 'POST /entries', 'k']) }],
    ['an outbox cursor above the bigint range', 'outbox', { state: 'dead', cursor: cursorOf(['9999999999999999999']) }],
  ])('answers %s with a 400 problem document, and logs no error', async (_case, path, query) => {
    const response = await read(path, query).expect(400);
    expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(response.body.type).toBe(AdminProblemType.BadRequest);
    expect(log.errors).toEqual([]);
  });

  it('refuses a NUL in an action before it runs, and a page with one as a 400 page', async () => {
    const action = await request(app.url)
      .post(`${ADMIN}/api/release`)
      .set('X-Operator', 'root')
      .send({ scope: ACME, operation: 'POST /entries', key: 'k\u0000', reason: 'customer retries' })
      .expect(400);
    expect(action.body.type).toBe(AdminProblemType.BadRequest);
    const page = await request(app.url).get(ADMIN).query({ key: 'k\u0000' }).set('X-Operator', 'root').expect(400);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.text).toContain(AdminProblemType.BadRequest);
    expect(log.errors).toEqual([]);
  });
});
