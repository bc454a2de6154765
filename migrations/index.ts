import { CreateIdempotencyRecords1764400000000 } from './1764400000000-CreateIdempotencyRecords.js';
import { CreateIdempotencyOutbox1764400010000 } from './1764400010000-CreateIdempotencyOutbox.js';

/**
 * The package's migrations, in order. Spread them into your DataSource's
 * `migrations`, beside your own:
 *
 * @example
 * new DataSource({ type: 'postgres', migrations: [...idempotencyMigrations, ...appMigrations] });
 */
export const idempotencyMigrations = [CreateIdempotencyRecords1764400000000, CreateIdempotencyOutbox1764400010000];
