import pg from 'pg';
import { createScratchDatabase } from '../../src/demo/database/scratch-database.js';

/** A database of its own for one suite, on the server of DATABASE_URL. */
export interface TestDatabase {
  url: string;
  query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]>;
  drop(): Promise<void>;
}

export async function createTestDatabase(): Promise<TestDatabase> {
  const serverUrl = process.env.DATABASE_URL;
  if (!serverUrl) throw new Error('DATABASE_URL is unset: the global setup (test/support/global-setup.ts) provides it');
  const database = await createScratchDatabase(serverUrl, 'idempotency_test');
  const pool = new pg.Pool({ connectionString: database.url, max: 2 });
  return {
    url: database.url,
    query: async (sql, params) => (await pool.query(sql, params)).rows,
    drop: async () => {
      await pool.end();
      await database.drop();
    },
  };
}
