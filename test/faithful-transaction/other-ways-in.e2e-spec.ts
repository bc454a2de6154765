import { ServiceUnavailableException } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import QueryStream from 'pg-query-stream';
import type { DataSource, QueryRunner } from 'typeorm';
import { countRows, eventually, FAITHFUL_ROWS_SCHEMA, type FaithfulApp, FaithfulRow, type HandlerContext, send, startFaithfulApp, TWINS, uniqueLabel } from '../support/faithful-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

/** The node-postgres pool and client, as far as an app's code reaches them. */
interface PgClient {
  query(sql: string | { text: string }, values?: unknown[]): Promise<{ rows: unknown[] }>;
  release(): void;
}
interface PostgresDriver {
  master: { query(sql: string, values?: unknown[]): Promise<unknown>; connect(): Promise<PgClient> };
  obtainMasterConnection(): Promise<[PgClient, () => void]>;
  createQueryRunner(mode: 'master'): QueryRunner;
}
const driverOf = (dataSource: DataSource) => dataSource.driver as unknown as PostgresDriver;
const requestClient = (dataSource: DataSource) => (dataSource.manager.queryRunner as unknown as { databaseConnection: PgClient } | undefined)?.databaseConnection;

const insert = (label: string, step: string) => ({ text: `INSERT INTO faithful_rows (label, step) VALUES ('${label}', '${step}')` });

/** Executions of a handler, by label. */
const executions = new Map<string, number>();
const firstExecution = (label: string) => {
  const count = (executions.get(label) ?? 0) + 1;
  executions.set(label, count);
  return count === 1;
};

/**
 * Ways to send a COMMIT that a reader of SQL other than PostgreSQL's
 * scanner misses, or that reach the request's pg client past TypeORM. The
 * handler writes, sends it, writes again, and fails on its first execution.
 */
const HIDDEN_COMMITS: Record<string, (dataSource: DataSource) => Promise<unknown>> = {
  'a line comment ended by a carriage return': (dataSource) => dataSource.query('-- x\rCOMMIT'),
  'nested block comments': (dataSource) => dataSource.query('/* a /* b */ x */ COMMIT'),
  'names with $ around it': (dataSource) => dataSource.query('SELECT 1 AS a$$; COMMIT; SELECT 2 AS b$$'),
  "an E'' string's escaped quote": (dataSource) => dataSource.query("SELECT E'\\''; COMMIT"),
  'a query config object': (dataSource) => dataSource.query({ text: 'COMMIT' } as unknown as string),
  'the request runner’s own client': (dataSource) => requestClient(dataSource)!.query('COMMIT'),
  "an E'' string continued on the next line": (dataSource) => dataSource.query("SELECT E''\n'\\'', '\\'; COMMIT"),
};

async function hiddenCommit({ dataSource }: HandlerContext, { label, way }: { label: string; way: string }) {
  await dataSource.query(insert(label, 'before').text);
  const sent = await HIDDEN_COMMITS[way](dataSource).then(
    () => 'sent',
    (error: Error) => error.name,
  );
  await dataSource.query(insert(label, 'after').text);
  if (firstExecution(label)) throw new ServiceUnavailableException('the downstream service timed out');
  return { label, sent };
}

/** A QueryRunner of the driver's own (`driver.createQueryRunner()`), below the DataSource's: its transaction, then a failure. */
async function driverQueryRunner({ dataSource }: HandlerContext, { label }: { label: string }) {
  const queryRunner = driverOf(dataSource).createQueryRunner('master');
  await queryRunner.connect();
  await queryRunner.startTransaction();
  await queryRunner.query(insert(label, 'driver').text);
  await queryRunner.commitTransaction();
  await queryRunner.release();
  if (firstExecution(label)) throw new ServiceUnavailableException('the downstream service timed out');
  return { label };
}

/** Ways to take a connection straight from the pool. */
const POOL_PATHS: Record<string, (dataSource: DataSource, sql: string, values: unknown[]) => Promise<unknown>> = {
  'the pool’s query()': (dataSource, sql, values) => driverOf(dataSource).master.query(sql, values),
  'the pool’s connect()': async (dataSource, sql, values) => {
    const client = await driverOf(dataSource).master.connect();
    try {
      return await client.query({ text: sql }, values);
    } finally {
      client.release();
    }
  },
  'obtainMasterConnection()': async (dataSource, sql, values) => {
    const [client, release] = await driverOf(dataSource).obtainMasterConnection();
    try {
      return await client.query({ text: sql }, values);
    } finally {
      release();
    }
  },
};

/** Changes a row through the repository, then through the pool: on a connection of its own the second waits for the first's lock. */
async function changeThroughThePool({ dataSource, repository }: HandlerContext, { label, way }: { label: string; way: string }) {
  await repository(FaithfulRow).update({ label }, { step: 'by the repository' });
  const pool = await POOL_PATHS[way](dataSource, `UPDATE faithful_rows SET step = 'by the pool' WHERE label = $1`, [label]).then(
    () => 'written',
    (error: Error) => ({ name: error.name, message: error.message }),
  );
  // After the request, the pool is the app's again: a timer's write there commits on its own.
  setTimeout(() => void POOL_PATHS[way](dataSource, insert(label, 'after the request').text, []), 200);
  return { label, pool };
}

/** Keeps the request's client, and reads a cursor on it once the request has ended. */
const keptCursors = new Map<string, Promise<unknown>>();
function keepClientForLater({ dataSource }: HandlerContext, { label }: { label: string }) {
  const client = requestClient(dataSource)!;
  keptCursors.set(
    label,
    new Promise((settled) =>
      setTimeout(() => {
        const stream = client.query(new QueryStream('SELECT 1') as unknown as string) as unknown as QueryStream;
        stream.on('error', (error: Error) => settled(error.name));
        stream.on('data', () => settled('read'));
      }, 200),
    ),
  );
  return { label };
}

/** Gives back a connection it was handed (`release()`), writes, waits while other requests run, and fails. */
const RELEASES: Record<string, (dataSource: DataSource) => Promise<void>> = {
  'the request runner’s release()': (dataSource) => dataSource.manager.queryRunner!.release(),
  'the client of a QueryRunner’s connect()': async (dataSource) => {
    const queryRunner = dataSource.createQueryRunner();
    const client = (await queryRunner.connect()) as PgClient;
    client.release();
  },
};

async function releaseThenFail({ dataSource }: HandlerContext, { label, way }: { label: string; way: string }) {
  await dataSource.query(insert(label, 'before').text);
  await RELEASES[way](dataSource);
  await sleep(300);
  await dataSource.query(insert(label, 'after').text);
  throw new ServiceUnavailableException('the downstream service timed out');
}

/** Two QueryRunner transactions, committed in the order they started. */
async function commitInStartOrder({ dataSource }: HandlerContext, { label }: { label: string }) {
  const a = dataSource.createQueryRunner();
  const b = dataSource.createQueryRunner();
  await a.startTransaction();
  await a.query(insert(label, 'a').text);
  await b.startTransaction();
  await b.query(insert(label, 'b').text);
  await a.commitTransaction();
  await b.commitTransaction();
  await Promise.all([a.release(), b.release()]);
  return { label };
}

/** A QueryRunner transaction left open, a second one committed inside it. */
async function commitInsideOneLeftOpen({ dataSource }: HandlerContext, { label }: { label: string }) {
  const a = dataSource.createQueryRunner();
  const b = dataSource.createQueryRunner();
  await a.startTransaction();
  await a.query(insert(label, 'a').text);
  await b.startTransaction();
  await b.query(insert(label, 'b').text);
  await b.commitTransaction();
  return { label };
}

/** Drops a prepared statement of its own on the request's connection. */
async function dropOwnStatement({ dataSource }: HandlerContext, { label }: { label: string }) {
  await dataSource.query(`PREPARE mine AS SELECT 1`);
  await dataSource.query(`DEALLOCATE mine`);
  await dataSource.query(insert(label, 'written').text);
  return { label };
}

/**
 * The second review of issue 40: the ways to the request's connection
 * other than TypeORM's QueryRunner API, each run with `@Idempotent()` and
 * without, through the packed ES build.
 */
describe('other ways to the request’s connection', () => {
  let db: TestDatabase;
  let app: FaithfulApp;
  const rows = (label: string, where = 'true') => countRows(db, 'faithful_rows', `label = $1 AND ${where}`, [label]);

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(FAITHFUL_ROWS_SCHEMA);
    app = await startFaithfulApp({
      db,
      entities: [FaithfulRow],
      routes: [
        { path: 'hidden-commit', handle: hiddenCommit },
        { path: 'driver-runner', handle: driverQueryRunner },
        { path: 'pool', handle: changeThroughThePool },
        { path: 'kept-client', handle: keepClientForLater },
        { path: 'release', handle: releaseThenFail },
        { path: 'start-order', handle: commitInStartOrder },
        { path: 'left-open', handle: commitInsideOneLeftOpen },
        { path: 'deallocate', handle: dropOwnStatement },
        { path: 'plain', handle: ({ dataSource }, { label }) => dataSource.query(insert(label, 'plain').text).then(() => ({ label })) },
      ],
    });
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it.each(Object.keys(HIDDEN_COMMITS))('commits nothing of a failed request that sent a COMMIT through %s, and its retry writes once', async (way) => {
    const label = uniqueLabel('hidden-commit');
    const key = `${label}:key`;
    const first = await send(app, 'hidden-commit', 'with', { label, way }, { key });
    expect(first.status).toBe(503);
    expect(await rows(label)).toBe(0);
    const retry = await send(app, 'hidden-commit', 'with', { label, way }, { key });
    expect(retry.status, retry.text).toBe(201);
    expect([await rows(label, `step = 'before'`), await rows(label, `step = 'after'`)]).toEqual([1, 1]);
  });

  it('keeps nothing of a failed request that wrote through a QueryRunner of the driver’s, and its retry writes once', async () => {
    const labels = { with: uniqueLabel('driver-with'), without: uniqueLabel('driver-without') };
    const key = `${labels.with}:key`;
    const firsts = await Promise.all(TWINS.map((twin) => send(app, 'driver-runner', twin, { label: labels[twin] }, { key })));
    expect(firsts.map((answer) => answer.status)).toEqual([503, 503]);
    // Without the module the write committed on its own.
    expect([await rows(labels.with), await rows(labels.without)]).toEqual([0, 1]);
    const retry = await send(app, 'driver-runner', 'with', { label: labels.with }, { key });
    expect(retry.status, retry.text).toBe(201);
    expect(await rows(labels.with)).toBe(1);
  });

  it.each(Object.keys(POOL_PATHS))('refuses a connection from %s inside the request, naming the fix, rather than wait on the request’s own lock; after the request it is the app’s', async (way) => {
    const labels = { with: uniqueLabel('pool-with'), without: uniqueLabel('pool-without') };
    for (const label of Object.values(labels)) await db.query(`INSERT INTO faithful_rows (label, step) VALUES ($1, 'seeded')`, [label]);
    const [withModule, without] = await Promise.all(TWINS.map((twin) => send(app, 'pool', twin, { label: labels[twin], way }, { timeoutMs: 5000 })));
    expect([withModule.status, without.status]).toEqual([201, 201]);
    expect(without.body.pool).toBe('written');
    expect(withModule.body.pool.name).toBe('PoolConnectionRefusedError');
    expect(withModule.body.pool.message).toContain('IdempotencyTransactionHost.outside(');
    expect(await eventually(async () => (await rows(labels.with, `step = 'after the request'`)) === 1, 2000), 'the write after the request committed').toBe(true);
  });

  it('fails a stream on the request’s client kept past the request through the stream, rather than crash the process', async () => {
    const label = uniqueLabel('kept-client');
    expect((await send(app, 'kept-client', 'with', { label })).status).toBe(201);
    expect(await keptCursors.get(label)).toBe('TransactionClosedError');
  });

  it.each(Object.keys(RELEASES))('keeps the connection given back by %s with the request: nothing of it commits, with another request’s work or alone', async (way) => {
    const label = uniqueLabel('release');
    const failing = send(app, 'release', 'with', { label, way });
    // Other requests run, and commit, while the failing one waits with its connection given back.
    const others = await Promise.all(Array.from({ length: 6 }, () => uniqueLabel('plain')).map(async (other) => ({ other, answer: await send(app, 'plain', 'without', { label: other }) })));
    expect((await failing).status).toBe(503);
    expect(await rows(label)).toBe(0);
    for (const { other, answer } of others) {
      expect(answer.status).toBe(201);
      expect(await rows(other)).toBe(1);
    }
  });

  it('commits two QueryRunner transactions committed in the order they started, as without the module', async () => {
    const labels = { with: uniqueLabel('start-order-with'), without: uniqueLabel('start-order-without') };
    const answers = await Promise.all(TWINS.map((twin) => send(app, 'start-order', twin, { label: labels[twin] })));
    expect(answers.map((answer) => answer.status)).toEqual([201, 201]);
    expect([await rows(labels.with), await rows(labels.without)]).toEqual([2, 2]);
  });

  it('rolls the request back, rather than record its success without them, when a transaction left open takes one committed inside it', async () => {
    const label = uniqueLabel('left-open');
    const answer = await send(app, 'left-open', 'with', { label });
    expect(answer.status).toBe(500);
    expect(await rows(label)).toBe(0);
  });

  it('answers the requests after one that dropped a prepared statement of its own, with no 503', async () => {
    const labels = Array.from({ length: 4 }, () => uniqueLabel('deallocate'));
    const statuses: Array<number | 'no answer'> = [];
    for (const label of labels) statuses.push((await send(app, 'deallocate', 'with', { label })).status);
    expect(statuses).toEqual([201, 201, 201, 201]);
  });
});
