import { CreateIdempotencyRecords1764400000000 } from './1764400000000-CreateIdempotencyRecords.js';
import { CreateIdempotencyOutbox1764400010000 } from './1764400010000-CreateIdempotencyOutbox.js';
import { AddIdempotencyAdminIndexes1764400020000 } from './1764400020000-AddIdempotencyAdminIndexes.js';

/**
 * The package's migrations, in order. Spread them into your DataSource's
 * `migrations`, beside your own:
 *
 * @example
 * new DataSource({ type: 'postgres', migrations: [...idempotencyMigrations, ...appMigrations] });
 */
export const idempotencyMigrations = [CreateIdempotencyRecords1764400000000, CreateIdempotencyOutbox1764400010000, AddIdempotencyAdminIndexes1764400020000];
