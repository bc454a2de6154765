// Plain ESM: Jest loads global setup outside its module mapper, so this
// imports the compiled launcher (`npm test` builds first).
import { randomUUID } from 'node:crypto';
import { sharedTempDir, startEmbeddedPostgres } from '../../dist/src/demo/database/embedded-postgres.js';

/**
 * Uses the server named by DATABASE_URL, or starts an embedded PostgreSQL for
 * the run. Workers inherit DATABASE_URL; each suite makes its own database.
 */
export default async function globalSetup() {
  if (process.env.DATABASE_URL) return;
  const database = await startEmbeddedPostgres({ dataDir: sharedTempDir('test-data', randomUUID()) });
  globalThis.embeddedTestDatabase = database;
  process.env.DATABASE_URL = database.url;
}
