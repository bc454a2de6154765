import { randomUUID } from 'node:crypto';
import { sharedTempDir, startEmbeddedPostgres } from '../../src/demo/database/embedded-postgres.js';

/**
 * Uses the server named by DATABASE_URL, or starts an embedded PostgreSQL for
 * the run and returns its stop as the teardown. The test workers start after
 * this and inherit DATABASE_URL; each suite makes its own database.
 */
export default async function globalSetup(): Promise<(() => Promise<void>) | void> {
  if (process.env.DATABASE_URL) return;
  const database = await startEmbeddedPostgres({ dataDir: sharedTempDir('test-data', randomUUID()) });
  process.env.DATABASE_URL = database.url;
  return () => database.stop();
}
