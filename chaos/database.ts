import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import pg from 'pg';
import { freePort, sharedTempDir, startEmbeddedPostgres, type EmbeddedDatabase } from '../src/demo/database/embedded-postgres.js';
import { createScratchDatabase } from '../src/demo/database/scratch-database.js';
import type { SeededRandom } from './random.js';

/** Marks the harness's own connections, so that backend terminations spare them. */
const HARNESS_APPLICATION = 'chaos-harness';
/** embedded-postgres waits for the server's exit without a bound; a wedged server must not hang the run. */
const STOP_TIMEOUT_MS = 30_000;

/** The run's own database, and the faults that can be done to its server. */
export interface ChaosDatabase {
  /** The run database, for the app instances. */
  url: string;
  /** `embedded` when the harness owns the server and may restart it. */
  mode: 'embedded' | 'server';
  query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]>;
  /** Terminates a random subset of the app's backends on the run database; returns how many. */
  terminateBackends(random: SeededRandom): Promise<number>;
  /** Stops and starts the server on the same port and data; undefined when the server is not the harness's. */
  restart?: () => Promise<void>;
  /** Drops the run database, or stops the embedded server and deletes its data. */
  close(): Promise<void>;
}

/** What the checks after a run read through: a query on the run database. */
export type DatabaseReader = Pick<ChaosDatabase, 'query'>;

/**
 * A fresh database for the run: on the server of `DATABASE_URL` when set,
 * else on an embedded PostgreSQL started on a fixed port with a data folder
 * of its own, persistent so that a restart keeps the data.
 */
export async function openChaosDatabase(log: (line: string) => void): Promise<ChaosDatabase> {
  const serverUrl = process.env.DATABASE_URL;
  if (serverUrl) {
    const scratch = await createScratchDatabase(serverUrl, 'chaos');
    const name = databaseName(scratch.url);
    log(`database ${name} on the server of DATABASE_URL (PostgreSQL restarts are skipped: the server is not the harness's)`);
    const pool = harnessPool(scratch.url);
    return {
      url: scratch.url,
      mode: 'server',
      ...access(pool, name),
      close: async () => {
        await pool.end();
        await scratch.drop();
      },
    };
  }

  const dataDir = sharedTempDir('chaos-data', randomUUID());
  // embedded-postgres stops its server on SIGINT and then exits the process itself,
  // possibly before the cleanup ran: the data folder must not outlive the run even then.
  process.once('exit', () => rmSync(dataDir, { recursive: true, force: true }));
  const port = await freePort();
  const start = () => startEmbeddedPostgres({ dataDir, port, persistent: true });
  let server: EmbeddedDatabase | undefined;
  let url: string;
  try {
    server = await start();
    // Dropped with the whole cluster at the end, so only its URL is kept.
    url = (await createScratchDatabase(server.url, 'chaos')).url;
  } catch (error) {
    await stopBounded(server);
    await rm(dataDir, { recursive: true, force: true });
    throw error;
  }
  const name = databaseName(url);
  log(`embedded PostgreSQL on port ${port}, database ${name}`);
  const pool = harnessPool(url);
  return {
    url,
    mode: 'embedded',
    ...access(pool, name),
    restart: async () => {
      await stopBounded(server);
      server = undefined;
      server = await start();
    },
    close: async () => {
      await pool.end().catch(() => undefined);
      await stopBounded(server);
      server = undefined;
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

function access(pool: pg.Pool, name: string): Pick<ChaosDatabase, 'query' | 'terminateBackends'> {
  return {
    query: async <T>(sql: string, params?: unknown[]) => (await pool.query(sql, params)).rows as T[],
    terminateBackends: async (random) => {
      const backends = await pool.query<{ pid: number }>(
        `SELECT pid FROM pg_stat_activity
          WHERE datname = $1 AND pid <> pg_backend_pid() AND application_name IS DISTINCT FROM $2`,
        [name, HARNESS_APPLICATION],
      );
      const share = 0.3 + random.next() * 0.5;
      const chosen = backends.rows.map((row) => row.pid).filter(() => random.chance(share));
      if (chosen.length === 0 && backends.rows.length > 0) chosen.push(random.pick(backends.rows).pid);
      const result = await pool.query<{ terminated: boolean }>(
        `SELECT pg_terminate_backend(pid) AS terminated FROM pg_stat_activity
          WHERE datname = $1 AND pid <> pg_backend_pid() AND pid = ANY($2::int[])`,
        [name, chosen],
      );
      return result.rows.filter((row) => row.terminated).length;
    },
  };
}

function harnessPool(url: string): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max: 3, application_name: HARNESS_APPLICATION });
  // Idle connections die with every restart of the server; the next query opens a new one.
  pool.on('error', () => undefined);
  return pool;
}

function databaseName(url: string): string {
  return decodeURIComponent(new URL(url).pathname.slice(1));
}

async function stopBounded(server: EmbeddedDatabase | undefined): Promise<void> {
  if (!server) return;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`embedded PostgreSQL did not stop within ${STOP_TIMEOUT_MS} ms`)), STOP_TIMEOUT_MS);
  });
  try {
    await Promise.race([server.stop(), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
