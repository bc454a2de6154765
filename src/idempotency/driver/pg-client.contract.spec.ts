import pg from 'pg';
import { DataSource, type QueryRunner } from 'typeorm';
import { type PgClient, PgClientDriver } from './pg-client.driver.js';
import { poolReadOf } from './pool-reader.js';

/** A TypeORM DataSource on the test server, pipelined as an app sets it. */
async function pipelinedDataSource(): Promise<DataSource> {
  return new DataSource({ type: 'postgres', url: process.env.DATABASE_URL, extra: { max: 1, pipeline: true } }).initialize();
}

/** Counts the writes to the client's socket, whatever the stream does with them. */
function countWrites(client: PgClient): { readonly count: number } {
  const stream = client.connection!.stream as unknown as { _write: Function; _writev?: Function };
  const counter = { count: 0 };
  for (const key of ['_write', '_writev'] as const) {
    const original = stream[key];
    if (original) stream[key] = (...args: unknown[]) => (counter.count++, original.apply(stream, args));
  }
  return counter;
}

/**
 * The pg and TypeORM internals PgClientDriver relies on (pg-client.driver.ts):
 * the client's `pipeline` flag, its socket's cork/uncork, named statements in
 * the object form, the QueryRunner's transaction flags, and the server's
 * errors as its `connection` emits them. These fail loudly when a pg or
 * TypeORM release changes them; the module would otherwise fall back to
 * TypeOrmDriver at run time, with one warning, and lose a round trip, or
 * answer a session ended for idling with a 503 that does not say so.
 */
describe('driving the claim on the pg client (contract with pg and TypeORM)', () => {
  let dataSource: DataSource;
  let runner: QueryRunner;
  let client: PgClient;

  beforeAll(async () => {
    dataSource = await pipelinedDataSource();
  });
  beforeEach(async () => {
    runner = dataSource.createQueryRunner();
    client = (await runner.connect()) as PgClient;
  });
  afterEach(async () => {
    if (runner.isTransactionActive) await client.query('ROLLBACK');
    await runner.release();
  });
  afterAll(() => dataSource.destroy());

  it('finds everything it relies on under a TypeORM QueryRunner (else the module falls back to TypeOrmDriver)', () => {
    expect(PgClientDriver.unfitFor(runner, client)).toBeUndefined();
  });

  it('reads pg’s `pipeline` flag, which TypeORM sets from `extra: { pipeline: true }`', () => {
    expect(client.pipeline).toBe(true);
    expect(new pg.Client({}).pipeline).toBe(false);
  });

  it('sends BEGIN and the claim in one socket write by corking the client’s `connection.stream`', async () => {
    const driver = new PgClientDriver(runner, client, { preparedStatements: true });
    const writes = countWrites(client);
    const settled = await driver.begin('READ COMMITTED', [`SELECT 'claimed' AS claim`]);
    expect(settled).toEqual([{ status: 'fulfilled', value: expect.objectContaining({ rows: [{ claim: 'claimed' }] }) }]);
    expect(writes.count).toBe(1);
    await driver.rollback();
  });

  it('prepares a statement given in pg’s object form `{ name, text, values }` once per connection', async () => {
    const statement = { name: 'idempotency.contract-probe', text: 'SELECT $1::int AS n', values: [7] };
    expect((await client.query(statement)).rows).toEqual([{ n: 7 }]);
    expect((await client.query({ ...statement, values: [8] })).rows).toEqual([{ n: 8 }]);
    const prepared = await client.query<{ name: string }>(`SELECT name FROM pg_prepared_statements WHERE name = 'idempotency.contract-probe'`);
    expect(prepared.rows).toEqual([{ name: 'idempotency.contract-probe' }]);
  });

  it('keeps TypeORM’s transaction state in `isTransactionActive` and `transactionDepth`', async () => {
    expect([runner.isTransactionActive, (runner as unknown as { transactionDepth: number }).transactionDepth]).toEqual([false, 0]);
    await runner.startTransaction();
    expect([runner.isTransactionActive, (runner as unknown as { transactionDepth: number }).transactionDepth]).toEqual([true, 1]);
    await runner.rollbackTransaction();
    expect([runner.isTransactionActive, (runner as unknown as { transactionDepth: number }).transactionDepth]).toEqual([false, 0]);
  });

  it('makes `runner.manager` writes join the transaction it began behind TypeORM’s back (a nested transaction is a savepoint)', async () => {
    const driver = new PgClientDriver(runner, client, { preparedStatements: true });
    await driver.begin('READ COMMITTED', []);
    const sent: string[] = [];
    const query = runner.query.bind(runner);
    runner.query = ((sql: string, ...rest: unknown[]) => (sent.push(sql), query(sql, ...(rest as [])))) as QueryRunner['query'];
    await runner.manager.transaction((inner) => inner.query('SELECT 1'));
    // PostgreSQL refuses a SAVEPOINT outside a transaction block: these ran inside the driver's.
    expect(sent).toEqual(['SAVEPOINT typeorm_1', 'SELECT 1', 'RELEASE SAVEPOINT typeorm_1']);
    await driver.rollback();
    expect(runner.isTransactionActive).toBe(false);
  });

  it('hears the FATAL of a session PostgreSQL ended for idling in its transaction (25P03), which fails no query, as the connection’s `errorMessage`', async () => {
    const driver = new PgClientDriver(runner, client, { preparedStatements: true });
    await driver.begin('READ COMMITTED', [`SELECT set_config('idle_in_transaction_session_timeout', '100ms', true)`]);
    expect(driver.endedByIdleTimeout).toBe(false);
    await vi.waitFor(() => expect(driver.endedByIdleTimeout).toBe(true), { timeout: 5000, interval: 20 });
    await driver.rollback();
  });

  it('takes a session ended otherwise (pg_terminate_backend) for no idle timeout', async () => {
    const driver = new PgClientDriver(runner, client, { preparedStatements: true });
    await driver.begin('READ COMMITTED', []);
    const [{ pid }] = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows;
    const admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await admin.connect();
    try {
      await admin.query('SELECT pg_terminate_backend($1)', [pid]);
    } finally {
      await admin.end();
    }
    await vi.waitFor(() => expect(runner.isReleased).toBe(true), { timeout: 5000, interval: 20 });
    expect(driver.endedByIdleTimeout).toBe(false);
    await driver.rollback();
  });
});

/** The pool under TypeORM's postgres driver that poolReadOf (pool-reader.ts) reads through. */
describe('reading from the pool under TypeORM (contract with TypeORM)', () => {
  let dataSource: DataSource;

  beforeAll(async () => {
    dataSource = await pipelinedDataSource();
  });
  afterAll(() => dataSource.destroy());

  it('finds node-postgres’s Pool as the driver’s `master`, and prepares each read there once per connection', async () => {
    expect((dataSource.driver as unknown as { master: unknown }).master).toBeInstanceOf(pg.Pool);
    const read = poolReadOf(dataSource, { preparedStatements: true });
    const statement = { name: 'idempotency.contract-pool-read', text: 'SELECT $1::int AS n', values: [5] };
    expect(await read(statement)).toEqual([{ n: 5 }]);
    // The pool has one connection: the statement prepared above is there.
    expect(await read({ name: 'idempotency.contract-prepared', text: 'SELECT count(*)::int AS n FROM pg_prepared_statements WHERE name = $1', values: [statement.name] })).toEqual([{ n: 1 }]);
  });
});
