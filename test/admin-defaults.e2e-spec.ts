import type { ExecutionContext } from '@nestjs/common';
import request from 'supertest';
import { AdminProblemType, IdempotencyAdminModule } from '../src/idempotency/admin/index.js';
import { compileAdmin } from './support/admin-boot.js';
import { HTTP_ADAPTERS, startApp, type RunningApp } from './support/http-app.js';
import { LEDGER_SCHEMA, ledgerAppModules } from './support/ledger-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

/** A guard that answers false rather than throwing: a "no" only the admin renders. */
const signedIn = (context: ExecutionContext) => context.switchToHttp().getRequest().headers['x-operator'] === 'root';

describe.each(HTTP_ADAPTERS)('the admin refusing a request (%s)', (adapter) => {
  let db: TestDatabase;
  let app: RunningApp;

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(LEDGER_SCHEMA);
    app = await startApp({ imports: [...ledgerAppModules(db.url, { reaper: false }), IdempotencyAdminModule.forRoot({ path: 'admin', guard: signedIn, scopes: 'all', actor: () => 'root' })] }, { adapter });
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  const problem = async (response: request.Test, status: number, type: string) => {
    const answered = await response.expect(status);
    expect(answered.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(answered.body).toMatchObject({ type, status, title: expect.any(String), detail: expect.any(String) });
  };

  it("answers the guard's no with the problem document the docs promise, on the API and on the page", async () => {
    await request(app.url).get('/admin/api/records').set('X-Operator', 'root').expect(200);
    await problem(request(app.url).get('/admin/api/records'), 403, AdminProblemType.Forbidden);
    await problem(request(app.url).post('/admin/api/release').send({ scope: 'anonymous', operation: 'POST /entries', key: 'k', reason: 'r' }), 403, AdminProblemType.Forbidden);
    const page = await request(app.url).get('/admin').expect(403);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.text).toContain(AdminProblemType.Forbidden);
  });

  it('answers its own gate\'s refusals of an action as problem documents too', async () => {
    const action = () => request(app.url).post('/admin/api/release').set('X-Operator', 'root');
    await problem(action().set('Sec-Fetch-Site', 'cross-site').send({ reason: 'r' }), 403, AdminProblemType.CrossSite);
    await problem(action().type('form').send({ reason: 'r' }), 415, AdminProblemType.NotJson);
  });
});

describe('the admin module without a stated scopes', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it.each([
    ['left out', undefined],
    ['not one it knows', 'every'],
  ])('refuses to start when scopes is %s, naming the fix', async (_case, scopes) => {
    await expect(compileAdmin(db.url, { guard: signedIn, scopes: scopes as never })).rejects.toThrow(/refuses to start without `scopes`.*State which tenants a caller may see.*scopes: 'all'/s);
  });
});
