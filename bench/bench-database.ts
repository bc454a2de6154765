import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { withClient } from '../src/demo/database/scratch-database.js';
import { sharedTempDir, startEmbeddedPostgres, type EmbeddedDatabase } from '../src/demo/database/embedded-postgres.js';

/** A database made for one bench run, on DATABASE_URL's server or an embedded one. */
export interface BenchDatabase {
  url: string;
  /** e.g. `embedded PostgreSQL 18.1` or `PostgreSQL 15.2 at 127.0.0.1:5432`. */
  description: string;
  /** Whether the run started the server itself (embedded), so that its settings are the run's to change. */
  ownServer: boolean;
  /** Creates one more database on the same server, dropped with the first at close; resolves to its URL. */
  addDatabase(): Promise<string>;
  /** Drops the database and stops the embedded server, if one was started. Safe to call twice. */
  close(): Promise<void>;
}

/** How long an embedded server may take to stop before its folder is removed anyway. */
const STOP_TIMEOUT_MS = 15_000;

/**
 * Creates a fresh database for the run, so that runs never see each other's
 * keys or orders, on DATABASE_URL's server or, without it, on an embedded
 * server whose data folder is removed when it stops.
 */
export async function createBenchDatabase(runId: string, log: (line: string) => void): Promise<BenchDatabase> {
  let embedded: EmbeddedDatabase | undefined;
  let dataDir: string | undefined;
  let serverUrl = process.env.DATABASE_URL;
  if (!serverUrl) {
    dataDir = sharedTempDir('bench-data', runId);
    log(`starting an embedded PostgreSQL in ${dataDir}`);
    embedded = await startEmbeddedPostgres({ dataDir, persistent: false });
    serverUrl = embedded.url;
  }
  const name = `idempotency_bench_${randomBytes(6).toString('hex')}`;
  const stopServer = async () => {
    if (!embedded) return;
    // embedded-postgres waits for an exit event that never comes when Ctrl-C already stopped the server.
    await Promise.race([embedded.stop(), new Promise((resolve) => setTimeout(resolve, STOP_TIMEOUT_MS).unref())]);
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  };
  let version: string;
  try {
    version = await withClient(serverUrl, async (client) => {
      await client.query(`CREATE DATABASE ${name}`);
      const { rows } = await client.query<{ server_version: string }>('SHOW server_version');
      return rows[0].server_version;
    });
  } catch (error) {
    await stopServer();
    throw error;
  }
  const urlOf = (database: string) => {
    const url = new URL(serverUrl);
    url.pathname = `/${database}`;
    return url.toString();
  };
  const names = [name];
  let closed = false;
  return {
    url: urlOf(name),
    description: embedded ? `embedded PostgreSQL ${version}` : `PostgreSQL ${version} at ${new URL(serverUrl).host}`,
    ownServer: embedded !== undefined,
    addDatabase: async () => {
      const extra = `${name}_${names.length}`;
      names.push(extra);
      await withClient(serverUrl, (client) => client.query(`CREATE DATABASE ${extra}`));
      return urlOf(extra);
    },
    close: async () => {
      if (closed) return;
      closed = true;
      // An embedded cluster is removed whole, and may already be shutting down after Ctrl-C.
      if (embedded) return stopServer();
      for (const database of names) {
        await withClient(serverUrl, (client) => client.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)).catch((error: unknown) =>
          log(`could not drop database ${database}: ${String(error)}`),
        );
      }
    },
  };
}

export { withClient };
