import type { LoggerService } from '@nestjs/common';
import { Client, Pool, type PoolClient } from 'pg';
import request from 'supertest';
import { HTTP_ADAPTERS, startApp, type RunningApp } from './support/http-app.js';
import { LEDGER_SCHEMA, ledgerAppModules } from './support/ledger-app.js';
import { pgbouncerBinary, startPgbouncer, type PrivatePgbouncer } from './support/pgbouncer.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { NamedStatementsProbe } from '../src/idempotency/driver/named-statements.js';
import type { ResolvedModuleOptions } from '../src/idempotency/options/idempotency.options.js';
import type { IdempotencyDataSource } from '../src/idempotency/transactions/idempotency-data-source.js';

const PGBOUNCER = pgbouncerBinary();
if (!PGBOUNCER) console.log('pgbouncer.e2e-spec: the PgBouncer suites skip, no pgbouncer binary (apt-get install pgbouncer, or set PGBOUNCER_BINARY)');

/** Keeps the warnings it is given; drops the rest. */
class WarningLog implements LoggerService {
  readonly warnings: string[] = [];
  log(): void {}
  error(): void {}
  warn(message: string): void {
    this.warnings.push(message);
  }
}

/**
 * Behind PgBouncer in transaction mode, as Debian ships it (1.18, which does
 * not track prepared statements), with the module's default options: it must
 * find out at startup that its named statements do not survive there, and
 * keep its contract with no 5xx, pipelined or not.
 */
describe.skipIf(!PGBOUNCER).each(HTTP_ADAPTERS.flatMap((adapter) => [false, true].map((pipeline) => ({ adapter, pipeline }))))(
  'behind PgBouncer in transaction mode, default options ($adapter, pipeline $pipeline)',
  ({ adapter, pipeline }) => {
    let db: TestDatabase;
    let bouncer: PrivatePgbouncer;
    let app: RunningApp;
    const log = new WarningLog();
    let seq = 0;
    const newKey = () => `bouncer-${adapter}-${pipeline}-${++seq}-${Date.now()}`;
    const post = (path: string, key: string, label: string) => Promise.resolve(request(app.url).post(path).set('Idempotency-Key', key).set('X-Tenant', 'acme').send({ label }));
    const entries = async (label: string) => Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM ledger_entries WHERE label = $1`, [label]))[0].n);

    beforeAll(async () => {
      db = await createTestDatabase();
      await db.query(LEDGER_SCHEMA);
      bouncer = await startPgbouncer(PGBOUNCER!, db.url);
      app = await startApp({ imports: ledgerAppModules(bouncer.urlFor(db.url), {}, { extra: { max: 16, pipeline } }) }, { adapter, logger: log });
    });
    afterAll(async () => {
      await app?.close();
      await bouncer?.stop();
      await db?.drop();
    });

    it('finds out at startup that its named statements do not survive, sends them unnamed, and says so once, naming the option', async () => {
      expect(log.warnings.filter((message) => message.includes('preparedStatements: false'))).toHaveLength(1);
      const answer = await post('/entries/prepared', newKey(), 'prepared');
      expect(answer.status).toBe(201);
      expect(answer.body.prepared).toEqual([]);
    });

    it('keeps the contract: a first execution, its replay, 422, and 20 concurrent duplicates that leave one entry', async () => {
      const key = newKey();
      const first = await post('/entries', key, `contract-${key}`);
      expect(first.status).toBe(201);
      const replay = await post('/entries', key, `contract-${key}`);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(first.text);
      expect((await post('/entries', key, 'another request')).status).toBe(422);

      const burstKey = newKey();
      const answers = await Promise.all(Array.from({ length: 20 }, () => post('/entries', burstKey, `burst-${burstKey}`)));
      expect(answers.map((answer) => answer.status)).toEqual(Array(20).fill(201));
      expect(new Set(answers.map((answer) => answer.text)).size).toBe(1);
      expect(await entries(`burst-${burstKey}`)).toBe(1);
    });

    it('answers a burst of first executions from 16 clients with no 5xx', async () => {
      const statuses: number[] = [];
      const keys = Array.from({ length: 200 }, () => newKey());
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          for (let key = keys.pop(); key !== undefined; key = keys.pop()) statuses.push((await post('/entries', key, `load-${key}`)).status);
        }),
      );
      expect(statuses.filter((status) => status !== 201)).toEqual([]);
    });
  },
);

/**
 * The startup probe itself, on a pg Pool as TypeORM's postgres driver holds
 * one. Under load, other work at startup (the module's own compatibility
 * check, the app's providers) ends transactions while the probe runs, and a
 * pooler hands the freed server connections on first.
 */
describe('the named-statements probe', () => {
  let db: TestDatabase;
  const pools: Pool[] = [];
  const options = () => ({ preparedStatements: true, claimDriver: 'pg' }) as ResolvedModuleOptions;

  /** A pool to `url` that counts its connects, and runs `beforeConnect(n)` before the n-th. */
  function countingPool(url: string, beforeConnect: (n: number) => Promise<void> = async () => undefined) {
    const pool = new Pool({ connectionString: url, max: 8 });
    pools.push(pool);
    const connect = pool.connect.bind(pool) as () => Promise<PoolClient>;
    const counted = { connects: 0, pool };
    Object.assign(pool, { connect: async () => (await beforeConnect(++counted.connects), connect()) });
    return counted;
  }
  const probeOn = (pool: Pool, resolved: ResolvedModuleOptions) =>
    new NamedStatementsProbe({ dataSource: { driver: { master: pool } } } as unknown as IdempotencyDataSource, resolved).onModuleInit();

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await Promise.all(pools.filter((pool) => !pool.ended).map((pool) => pool.end()));
    await db?.drop();
  });

  it('keeps named statements on PostgreSQL itself, with one connection', async () => {
    const counted = countingPool(db.url);
    const resolved = options();
    await probeOn(counted.pool, resolved);
    expect(resolved.preparedStatements).toBe(true);
    expect(counted.connects).toBe(1);
  });

  it.skipIf(!PGBOUNCER)('finds them lost behind PgBouncer even when another transaction ends while it probes', async () => {
    const bouncer = await startPgbouncer(PGBOUNCER!, db.url);
    const url = bouncer.urlFor(db.url);
    // Another piece of startup work, in a transaction on a server connection of its own...
    const elsewhere = new Client({ connectionString: url });
    // ...which ends just after the probe prepared its statement, so that its server connection is the one freed last.
    const counted = countingPool(url, async (n) => {
      if (n === 2) await elsewhere.query('COMMIT');
    });
    try {
      await elsewhere.connect();
      await elsewhere.query('BEGIN');
      await elsewhere.query('SELECT 1');
      const resolved = options();
      await probeOn(counted.pool, resolved);
      expect(resolved.preparedStatements).toBe(false);
    } finally {
      // Before PgBouncer stops, which would end their connections under them.
      await counted.pool.end();
      await elsewhere.end();
      await bouncer.stop();
    }
  });
});
