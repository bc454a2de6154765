import { userInfo } from 'node:os';
import { DataSource } from 'typeorm';
import { CreateIdempotencyRecords1764400000000 } from '../../../migrations/1764400000000-CreateIdempotencyRecords.js';
import { adminDatabaseOf } from '../admin/admin-database.js';
import { IdempotencyAdmin } from '../admin/idempotency-admin.js';
import type { EncryptionKey } from '../records/encryption-keys.js';
import { resolveEncryption } from '../records/outcome-encryption.js';
import type { AdminActionEvent } from '../events/idempotency-event.types.js';
import { OutcomeCodec } from '../records/outcome-codec.js';
import { describeRecordsTable, type ModuleTables, moduleTablesIn, type RecordsTableDescription } from '../records/module-tables.js';

/** The module's default retention: what a claim marked failed keeps its failure for, unless it stored its route's own. */
const DEFAULT_RETENTION_MS = 24 * 60 * 60 * 1000;

/** What a CLI run connects with, from its environment. */
export interface CliEnvironment {
  DATABASE_URL?: string;
  /** `id:base64key,id:base64key`, as the app's `encryption.keys` (the first seals): to open sealed answers and seal a failure. */
  IDEMPOTENCY_ENCRYPTION_KEYS?: string;
}

/** The admin on `DATABASE_URL`, and how to close it. */
export interface CliAdmin {
  admin: IdempotencyAdmin;
  close(): Promise<void>;
}

/** Who the CLI acts as by default: the user running it. */
export function defaultActor(): string {
  return `${userInfo().username} (cli)`;
}

/**
 * Connects to `DATABASE_URL` with a DataSource of its own (two connections
 * at most) and builds the admin over it, on the tables in `schema` (`--schema`)
 * or, as the module finds them, where the connection's search_path finds
 * `idempotency_records`. Its events go to `audit`: the CLI writes them to
 * standard error, the app's log being out of reach.
 */
export async function connectAdmin(env: CliEnvironment, retentionMs: number | undefined, audit: (event: AdminActionEvent) => void, schema?: string): Promise<CliAdmin> {
  if (!env.DATABASE_URL) throw new UsageError('Set DATABASE_URL to the database the app writes its idempotency records to, e.g. postgres://user@host:5432/app.');
  // An operator reads what is stored, plaintext included, whatever the app's `acceptPlaintext`.
  const encryption = env.IDEMPOTENCY_ENCRYPTION_KEYS ? resolveEncryption({ keys: parseKeys(env.IDEMPOTENCY_ENCRYPTION_KEYS), acceptPlaintext: true }) : undefined;
  const dataSource = new DataSource({ type: 'postgres', url: env.DATABASE_URL, extra: { max: 2, application_name: 'nest-idempotency cli' } });
  await dataSource.initialize();
  let tables: ModuleTables;
  try {
    tables = tablesOf(await describeRecordsTable((text, values) => dataSource.query(text, values), schema), schema);
  } catch (error) {
    await dataSource.destroy();
    throw error;
  }
  const admin = new IdempotencyAdmin(adminDatabaseOf(() => dataSource, () => tables), {
    codec: new OutcomeCodec(encryption),
    emit: audit,
    retention: retentionMs ?? DEFAULT_RETENTION_MS,
  });
  return { admin, close: () => dataSource.destroy() };
}

/**
 * The tables in the schema the catalog found the records' table in. None
 * there is a usage error: the CLI was pointed at the wrong database or
 * schema, or the app's migrations never ran on it.
 */
function tablesOf(table: RecordsTableDescription, schema: string | undefined): ModuleTables {
  if (table.schema !== null) return moduleTablesIn(table.schema);
  const where = schema === undefined ? `on DATABASE_URL's search_path (${table.search_path || 'empty'})` : `in the schema ${JSON.stringify(schema)}`;
  throw new UsageError(
    `There is no table idempotency_records ${where}: pass --schema with the schema of the app's tables (its IdempotencyModule \`schema\`), ` +
      `or, if the app's migrations never ran on this database, ${runTheMigration(CreateIdempotencyRecords1764400000000)}.`,
  );
}

/** How a database gets one of the module's tables, as the app's startup check says it. */
export function runTheMigration(migration: { name: string }): string {
  return (
    `run the migration ${migration.name} (in \`idempotencyMigrations\`): spread \`idempotencyMigrations\` into the app's DataSource's \`migrations\` ` +
    'and set `migrationsRun: true`, or run `typeorm migration:run` with that DataSource'
  );
}

/** `id:key,id:key`; base64 and base64url hold no `:` nor `,`. */
function parseKeys(spec: string): EncryptionKey[] {
  return spec.split(',').map((entry, index) => {
    const separator = entry.indexOf(':');
    if (separator <= 0) throw new UsageError(`IDEMPOTENCY_ENCRYPTION_KEYS entry ${index + 1} is not of the form id:base64key.`);
    return { id: entry.slice(0, separator).trim(), key: entry.slice(separator + 1).trim() };
  });
}

/** A mistake in how the CLI was called or configured: exit code 2. */
export class UsageError extends Error {}
