import { createScratchDatabase as createDatabase, type ScratchDatabase } from '../../testing/scratch-database.js';

export type { ScratchDatabase } from '../../testing/scratch-database.js';
export { withClient } from '../../testing/pg-client.js';

/**
 * Creates an empty `<prefix>_<random>` on the server of `serverUrl` (whose user
 * may create databases), for one test suite, bench run or chaos run: the apps
 * run their migrations themselves at startup. Built on the testing kit's helper.
 */
export function createScratchDatabase(serverUrl: string, prefix: string): Promise<ScratchDatabase> {
  return createDatabase(serverUrl, { prefix, migrate: false });
}
