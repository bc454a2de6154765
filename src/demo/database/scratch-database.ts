import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';

/** A database of its own on a shared server: for one test suite, bench run or chaos run. */
export interface ScratchDatabase {
  url: string;
  /** Drops it, closing whatever connections are still open to it. */
  drop(): Promise<void>;
}

/** Creates `<prefix>_<random>` on the server of `serverUrl` (whose user may create databases). */
export async function createScratchDatabase(serverUrl: string, prefix: string): Promise<ScratchDatabase> {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  await withClient(serverUrl, (client) => client.query(`CREATE DATABASE ${name}`));
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
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
    },
  };
}

/** Runs `work` on a connection of its own, closed afterwards. */
export async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}
