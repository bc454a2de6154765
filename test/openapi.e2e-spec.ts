import request from 'supertest';
import { AppModule } from '../src/demo/app.module.js';
import { openApiDocument, serveOpenApi } from '../src/demo/openapi.js';
import { startApp, type RunningApp } from './support/http-app.js';
import { EntriesController, LEDGER_SCHEMA, ledgerAppModules } from './support/ledger-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

// In-process on Express only: test/demo.e2e-spec.ts checks /docs on Fastify against
// the real demo process.
describe('OpenAPI', () => {
  const adapter = 'express';
  let db: TestDatabase;
  let running: RunningApp;

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(LEDGER_SCHEMA);
    running = await startApp({ imports: [AppModule.forRoot({ databaseUrl: db.url, paymentProviderUrl: 'http://127.0.0.1:9' })] }, { adapter, configure: serveOpenApi });
  });
  afterAll(async () => {
    await running?.close();
    await db?.drop();
  });

  it('documents the key header, the problem responses and the replay header of @Idempotent() routes', () => {
    const document = openApiDocument(running.app);
    const create = document.paths['/orders'].post!;
    expect(create.parameters).toContainEqual(
      expect.objectContaining({ in: 'header', name: 'Idempotency-Key', required: true, schema: expect.objectContaining({ type: 'string', minLength: 1 }) }),
    );
    for (const status of ['400', '409', '422']) {
      const response = create.responses[status] as { content: Record<string, { schema: { properties: object } }> };
      expect(Object.keys(response.content)).toEqual(['application/problem+json']);
      expect(Object.keys(response.content['application/problem+json'].schema.properties)).toEqual(['type', 'title', 'status', 'detail']);
    }
    expect(create.responses['409']).toMatchObject({ headers: { 'Retry-After': expect.any(Object) } });
    expect(create.responses['201']).toMatchObject({ headers: { 'Idempotent-Replayed': expect.any(Object) } });
    expect(document.paths['/orders/{id}/payments'].post!.responses['201']).toMatchObject({ headers: { 'Idempotent-Replayed': expect.any(Object) } });
    expect(document.paths['/orders'].get!.parameters ?? []).not.toContainEqual(expect.objectContaining({ name: 'Idempotency-Key' }));
  });

  it('serves Swagger UI at /docs and the document at /docs-json', async () => {
    expect((await request(running.url).get('/docs')).text).toContain('swagger-ui');
    const json = await request(running.url).get('/docs-json');
    expect(json.status).toBe(200);
    expect(json.body.paths['/orders'].post.parameters).toContainEqual(expect.objectContaining({ name: 'Idempotency-Key' }));
  });

  // Without @nestjs/swagger installed, the same: the consumer apps (test/fixtures/) have none.
  it('leaves routes undocumented, and working, with openapi: false', async () => {
    const withoutSwagger = await startApp({ imports: ledgerAppModules(db.url, { openapi: false }) }, { adapter });
    try {
      expect(Reflect.getMetadata('swagger/apiHeaders', EntriesController.prototype.create)).toBeUndefined();
      const response = await request(withoutSwagger.url).post('/entries').set('Idempotency-Key', 'no-swagger').set('X-Tenant', 'acme').send({ label: 'x' });
      expect(response.status).toBe(201);
    } finally {
      await withoutSwagger.close();
    }
  });
});
