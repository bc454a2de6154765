import { Body, Controller, Post } from '@nestjs/common';
import { AssertionError } from 'node:assert';
import pg from 'pg';
import type { MigrationInterface, QueryRunner } from 'typeorm';
import { IdempotencyTransactionHost } from '../src/idempotency/index.js';
import { assertIdempotentRoute, createScratchDatabase, type ScratchDatabase } from '../src/testing/index.js';
import { HTTP_ADAPTERS, startApp, type RunningApp } from './support/http-app.js';
import { LEDGER_SCHEMA, ledgerAppModules } from './support/ledger-app.js';

/** A user's own migration, run by the kit beside the package's. */
class CreateLedgerEntries1764500000000 implements MigrationInterface {
  async up(runner: QueryRunner): Promise<void> {
    await runner.query(LEDGER_SCHEMA);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE ledger_entries`);
  }
}

class FailingMigration1764500000001 implements MigrationInterface {
  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`SELECT no_such_function()`);
  }

  async down(): Promise<void> {}
}

/** A route that writes without `@Idempotent()`: what the kit must catch. */
@Controller('unprotected')
class UnprotectedController {
  constructor(private readonly tx: IdempotencyTransactionHost) {}

  @Post()
  async create(@Body() body: { label: string }) {
    const [{ id }] = await this.tx.manager.query(`INSERT INTO ledger_entries (label) VALUES ($1) RETURNING id`, [body.label]);
    return { entry: Number(id) };
  }
}

const serverUrl = () => process.env.DATABASE_URL!;

async function databaseExists(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: serverUrl() });
  await client.connect();
  try {
    const { rows } = await client.query(`SELECT 1 FROM pg_database WHERE datname = $1`, [new URL(url).pathname.slice(1)]);
    return rows.length === 1;
  } finally {
    await client.end();
  }
}

describe('createScratchDatabase', () => {
  it('creates a database with the package migrations and the app migrations, and drops it', async () => {
    const db = await createScratchDatabase(serverUrl(), { prefix: 'kit_scratch', migrations: [CreateLedgerEntries1764500000000] });
    expect(new URL(db.url).pathname).toMatch(/^\/kit_scratch_[0-9a-f]{12}$/);
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    const { rows } = await client.query(`SELECT to_regclass('idempotency_records') AS records, to_regclass('ledger_entries') AS ledger`);
    await client.end();
    expect(rows[0]).toEqual({ records: 'idempotency_records', ledger: 'ledger_entries' });
    await db.drop();
    expect(await databaseExists(db.url)).toBe(false);
  });

  it('drops the database when a migration fails, and says why', async () => {
    await expect(createScratchDatabase(serverUrl(), { prefix: 'kit_failing', migrations: [FailingMigration1764500000001] })).rejects.toThrow(/no_such_function/);
    const client = new pg.Client({ connectionString: serverUrl() });
    await client.connect();
    const { rows } = await client.query(`SELECT datname FROM pg_database WHERE datname LIKE 'kit\\_failing\\_%'`);
    await client.end();
    expect(rows).toEqual([]);
  });

  // Unchecked, pg took a missing URL for its defaults and failed with "no PostgreSQL user name specified in startup packet".
  it.each([undefined, '', '  '])('names DATABASE_URL when the server URL is missing (%j)', async (missing) => {
    await expect(createScratchDatabase(missing)).rejects.toThrow(/^createScratchDatabase: no server URL \(.*\)\. Is DATABASE_URL set\? .*DATABASE_URL=postgres:\/\/.* npm run test:e2e$/);
  });

  it.each([
    ['127.0.0.1:5432', 'not a URL'],
    ['mysql://root@127.0.0.1/test', 'a mysql: URL'],
  ])('refuses a server URL that is no postgres:// URL (%s), naming DATABASE_URL', async (url, what) => {
    await expect(createScratchDatabase(url)).rejects.toThrow(new RegExp(`the server URL is ${what} \\(check DATABASE_URL\\)`));
  });

  it('refuses a prefix that is no plain identifier', async () => {
    await expect(createScratchDatabase(serverUrl(), { prefix: 'x; DROP DATABASE test' })).rejects.toThrow(/prefix/);
  });
});

describe.each(HTTP_ADAPTERS)('assertIdempotentRoute (%s)', (adapter) => {
  let db: ScratchDatabase;
  let pool: pg.Pool;
  let running: RunningApp;
  const countEntries = async () => (await pool.query(`SELECT count(*)::int AS n FROM ledger_entries`)).rows[0].n as number;
  const tenant = { 'x-tenant': 'acme' };

  beforeAll(async () => {
    db = await createScratchDatabase(serverUrl(), { prefix: 'kit_test', migrations: [CreateLedgerEntries1764500000000] });
    pool = new pg.Pool({ connectionString: db.url, max: 2 });
    running = await startApp({ imports: ledgerAppModules(db.url), controllers: [UnprotectedController] }, { adapter });
  });
  afterAll(async () => {
    await running?.close();
    await pool?.end();
    await db?.drop();
  });

  it('proves an @Idempotent() route idempotent, given the Nest app', async () => {
    const report = await assertIdempotentRoute({ app: running.app, path: '/entries', body: { label: 'kit' }, headers: tenant, countEffects: countEntries });
    expect(report.route).toBe('POST /entries');
    expect(report.checks.map(({ name, result }) => [name, result])).toEqual([
      ['first-execution', 'passed'],
      ['replay', 'passed'],
      ['key-reuse', 'passed'],
      ['missing-key', 'passed'],
      ['concurrent-burst', 'passed'],
    ]);
    expect(report).toMatchObject({ executions: 2, effectsAdded: 2, burst: { size: 10 } });
    expect(report.burst.replayed + report.burst.conflicts).toBe(9);
  });

  it('takes a URL, another success status, and routes where the key is optional', async () => {
    const transfers = await assertIdempotentRoute({ app: running.url, path: '/entries/acct-1/transfers', body: { label: 't' }, headers: tenant, countEffects: countEntries, burst: 5 });
    expect(transfers.checks[0].detail).toMatch(/^200/);
    const optional = await assertIdempotentRoute({ app: running.url, path: '/entries/optional', body: { label: 'o' }, headers: tenant, countEffects: countEntries, keyRequired: false });
    expect(optional.checks.find((check) => check.name === 'missing-key')).toMatchObject({ result: 'skipped' });
  });

  it('throws a clear AssertionError for a route without @Idempotent() that writes', async () => {
    const error = await assertIdempotentRoute({ app: running.app, path: '/unprotected', body: { label: 'u' }, headers: tenant, countEffects: countEntries }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(AssertionError);
    expect((error as AssertionError).message).toMatch(
      /^POST \/unprotected: a retry with the same Idempotency-Key added 1 effect \(\d+ → \d+\); expected 0\. The route is not idempotent: the handler ran again\. Is @Idempotent\(\) on it/,
    );
  });

  it('says when a route takes requests without a key that it was told to require', async () => {
    await expect(assertIdempotentRoute({ app: running.app, path: '/entries/optional', body: { label: 'o' }, headers: tenant, countEffects: countEntries })).rejects.toThrow(
      /a request without Idempotency-Key added 1 effect .*A route that requires a key must refuse requests without one/,
    );
  });

  it('says when the fingerprint ignores the field the different body changes', async () => {
    await expect(assertIdempotentRoute({ app: running.app, path: '/entries/labelled', body: { label: 'l' }, headers: tenant, countEffects: countEntries, burst: 0 })).rejects.toThrow(
      /the used Idempotency-Key with a different body answered 201 .*; expected 422 \(key reused\)\. If the route fingerprints only some fields, pass a differentBody/,
    );
    const report = await assertIdempotentRoute({ app: running.app, path: '/entries/labelled', body: { label: 'l' }, differentBody: { label: 'other' }, headers: tenant, countEffects: countEntries, burst: 0 });
    expect(report.checks.find((check) => check.name === 'concurrent-burst')).toMatchObject({ result: 'skipped' });
  });
});
