import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { DataSource, type DataSourceOptions } from 'typeorm';
import { idempotencyMigrations } from '../../migrations/index.js';
import { withClient } from './pg-client.js';

/** A database of its own on a shared server: for one test suite, or one run of a harness. */
export interface ScratchDatabase {
  /** Its connection URL: the server's, with the database's name as path. */
  url: string;
  /** Drops it, closing whatever connections are still open to it. */
  drop(): Promise<void>;
}

/** The options of `createScratchDatabase()`. */
export interface ScratchDatabaseOptions {
  /** The name is `<prefix>_<12 hex digits>`. Lower-case letters, digits and `_`. Default `idempotency_scratch`. */
  prefix?: string;
  /** Your app's migrations (classes or glob paths, as in DataSource options), run with the package's. */
  migrations?: DataSourceOptions['migrations'];
  /** Whether to run migrations: the package's `idempotencyMigrations` and `migrations`. Default true; false leaves it empty. */
  migrate?: boolean;
}

/**
 * Creates a database on the PostgreSQL server of `serverUrl` (whose user may
 * create databases) and runs the package's migrations and yours on it, in
 * timestamp order, as your app's DataSource would.
 *
 * @example
 * const db = await createScratchDatabase(process.env.DATABASE_URL, { migrations: [CreateOrders1764500000000] });
 * // ... TypeOrmModule.forRoot({ type: 'postgres', url: db.url, ... })
 * await db.drop();
 */
export async function createScratchDatabase(serverUrl: string | undefined, options: ScratchDatabaseOptions = {}): Promise<ScratchDatabase> {
  serverUrl = checkedServerUrl(serverUrl);
  const prefix = options.prefix ?? 'idempotency_scratch';
  if (!/^[a-z_][a-z0-9_]{0,49}$/.test(prefix)) throw new Error(`createScratchDatabase: prefix ${JSON.stringify(prefix)} must be 1 to 50 lower-case letters, digits or _, not starting with a digit`);
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  await withClient(serverUrl, (client) => client.query(`CREATE DATABASE ${name}`));
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  const database: ScratchDatabase = { url: url.toString(), drop: () => dropDatabase(serverUrl, name) };
  if (options.migrate === false) return database;
  try {
    await runMigrations(database.url, [...idempotencyMigrations, ...migrationList(options.migrations)]);
  } catch (error) {
    await database.drop().catch(() => undefined);
    throw error;
  }
  return database;
}

/**
 * The server's URL, checked before pg reads it: pg takes a missing one for
 * its own defaults (PGUSER, PGHOST, ...) and fails far from the cause, with
 * "no PostgreSQL user name specified in startup packet".
 */
function checkedServerUrl(serverUrl: string | undefined): string {
  const example = 'e.g. DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm run test:e2e';
  if (typeof serverUrl !== 'string' || serverUrl.trim() === '') {
    throw new Error(
      `createScratchDatabase: no server URL (${JSON.stringify(serverUrl) ?? 'undefined'}). Is DATABASE_URL set? ` +
        `Run the tests with the URL of a PostgreSQL server whose user may create databases, ${example}`,
    );
  }
  let protocol: string;
  try {
    protocol = new URL(serverUrl).protocol;
  } catch {
    throw new Error(`createScratchDatabase: the server URL is not a URL (check DATABASE_URL); expected postgres://user@host:port/database, ${example}`);
  }
  if (protocol !== 'postgres:' && protocol !== 'postgresql:') {
    throw new Error(`createScratchDatabase: the server URL is a ${protocol} URL (check DATABASE_URL); expected postgres://user@host:port/database, ${example}`);
  }
  return serverUrl;
}

async function runMigrations(url: string, migrations: NonNullable<DataSourceOptions['migrations']>): Promise<void> {
  const dataSource = new DataSource({ type: 'postgres', url, migrations, logging: false, poolSize: 1 });
  await dataSource.initialize();
  try {
    await dataSource.runMigrations({ transaction: 'each' });
  } finally {
    await dataSource.destroy();
  }
}

function migrationList(migrations: DataSourceOptions['migrations']): Array<string | Function> {
  if (!migrations) return [];
  return Array.isArray(migrations) ? migrations : Object.values(migrations);
}

async function dropDatabase(serverUrl: string, name: string): Promise<void> {
  await withClient(serverUrl, async (client) => {
    // A pool's end() resolves before its sockets close; terminating one of those clients would
    // emit an 'error' nobody listens to any more. So wait briefly for them to leave, then force.
    for (let waited = 0; waited < 2_000; waited += 50) {
      const { rows } = await client.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1`, [name]);
      if (rows[0].n === 0) break;
      await sleep(50);
    }
    await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  });
}
