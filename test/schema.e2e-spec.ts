import { Test } from '@nestjs/testing';
import { DataSource } from 'typeorm';
import { IdempotencyConfigurationError, IdempotencyRecord, idempotencyMigrations } from '../src/idempotency/index.js';
import { type LedgerDataSourceOptions, ledgerAppModules } from './support/ledger-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

const MIGRATION = 'CreateIdempotencyRecords1764400000000';

/** Initialises the ledger app (no HTTP: the check does not depend on an adapter), then closes it. */
async function boot(db: TestDatabase, dataSource: LedgerDataSourceOptions = {}): Promise<void> {
  const moduleRef = await Test.createTestingModule({ imports: ledgerAppModules(db.url, { reaper: false }, dataSource) }).compile();
  moduleRef.useLogger(false);
  try {
    await moduleRef.init();
  } finally {
    await moduleRef.close();
  }
}

/** The boot's IdempotencyConfigurationError message. */
async function bootFailure(db: TestDatabase, dataSource: LedgerDataSourceOptions = {}): Promise<string> {
  const error = await boot(db, dataSource).then(
    () => undefined,
    (error: unknown) => error,
  );
  expect(error).toBeInstanceOf(IdempotencyConfigurationError);
  return (error as Error).message;
}

/** Starts over: no table, no migration recorded. */
const reset = (db: TestDatabase) => db.query(`DROP TABLE IF EXISTS idempotency_records, idempotency_outbox, migrations`);

/** What synchronize could change: columns with their defaults, index definitions, constraint definitions, storage parameters. */
async function catalog(db: TestDatabase): Promise<unknown> {
  const [{ table }] = await db.query<{ table: unknown }>(`
    SELECT json_build_object(
      'columns', (SELECT json_agg(json_build_object('name', a.attname, 'type', format_type(a.atttypid, a.atttypmod),
                                                    'notNull', a.attnotnull, 'default', pg_get_expr(d.adbin, d.adrelid)) ORDER BY a.attnum)
                    FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
                   WHERE a.attrelid = 'idempotency_records'::regclass AND a.attnum > 0 AND NOT a.attisdropped),
      'indexes', (SELECT json_agg(indexdef ORDER BY indexname) FROM pg_indexes WHERE tablename = 'idempotency_records'),
      'constraints', (SELECT json_agg(conname || ': ' || pg_get_constraintdef(oid) ORDER BY conname)
                        FROM pg_constraint WHERE conrelid = 'idempotency_records'::regclass),
      'options', (SELECT reloptions FROM pg_class WHERE oid = 'idempotency_records'::regclass)) AS table`);
  return table;
}

describe('the startup schema check', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });
  beforeEach(() => reset(db));

  it('fails the boot when the migration has not run, naming it and how to run it', async () => {
    const message = await bootFailure(db, { migrationsRun: false });
    expect(message).toContain('no table idempotency_records on the search_path (public)');
    expect(message).toContain(`Run the migration ${MIGRATION}`);
    expect(message).toContain('spread `idempotencyMigrations` into the DataSource\'s `migrations` and set `migrationsRun: true`');
    expect(message).toContain('`typeorm migration:run`');
  });

  it('boots once the migration has run', async () => {
    await expect(boot(db)).resolves.toBeUndefined();
    await expect(boot(db, { migrationsRun: false })).resolves.toBeUndefined();
  });

  it.each([
    ['the lease index', `DROP INDEX idempotency_records_lease_idx`, 'index idempotency_records_lease_idx is missing'],
    ['the expires_at index', `DROP INDEX idempotency_records_expires_at_idx`, 'index idempotency_records_expires_at_idx is missing'],
    ['the admin\'s created_at index', `DROP INDEX idempotency_records_created_at_idx`, 'index idempotency_records_created_at_idx is missing (the migration AddIdempotencyAdminIndexes1764400020000 adds it)'],
    ['the primary key', `ALTER TABLE idempotency_records DROP CONSTRAINT idempotency_records_pkey`, 'index idempotency_records_pkey is missing'],
    ['a column', `ALTER TABLE idempotency_records DROP COLUMN owner_token`, 'column owner_token is missing'],
    ['a column type', `ALTER TABLE idempotency_records ALTER COLUMN attempts TYPE bigint`, 'column attempts is bigint, not integer'],
    ['a NOT NULL', `ALTER TABLE idempotency_records ALTER COLUMN status DROP NOT NULL`, 'column status is nullable, not NOT NULL'],
    ['a check constraint', `ALTER TABLE idempotency_records DROP CONSTRAINT idempotency_records_outcome_chk`, 'constraint idempotency_records_outcome_chk is missing'],
  ])('fails the boot when %s differs from the migration', async (_piece, change, complaint) => {
    await boot(db);
    await db.query(change);
    const message = await bootFailure(db);
    expect(message).toContain(`the table public.idempotency_records is not as the migration ${MIGRATION} creates it: ${complaint}.`);
    expect(message).toContain('If it has not run, spread `idempotencyMigrations`');
  });

  it('fails the boot when TypeOrmModule leaves its DataSource uninitialised', async () => {
    expect(await bootFailure(db, { manualInitialization: true })).toContain('DataSource is not initialised');
  });

  it('looks the table up on the search_path, as the module\'s statements do', async () => {
    await db.query(`CREATE SCHEMA IF NOT EXISTS ledger_space`);
    const inLedgerSpace = { extra: { options: '-c search_path=ledger_space' } };
    await boot(db, inLedgerSpace);
    expect(await db.query(`SELECT 1 FROM pg_tables WHERE schemaname = 'ledger_space' AND tablename = 'idempotency_records'`)).toHaveLength(1);
    await expect(boot(db, { ...inLedgerSpace, migrationsRun: false })).resolves.toBeUndefined();
    expect(await bootFailure(db, { migrationsRun: false })).toContain('search_path (public)');
    await db.query(`DROP SCHEMA ledger_space CASCADE`);
  });
});

describe('IdempotencyRecord against the migration', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('leaves the schema builder nothing to do once the migration has run', async () => {
    const dataSource = new DataSource({ type: 'postgres', url: db.url, entities: [IdempotencyRecord], migrations: idempotencyMigrations, migrationsRun: true });
    await dataSource.initialize();
    try {
      const { upQueries } = await dataSource.driver.createSchemaBuilder().log();
      expect(upQueries.map((query) => query.query)).toEqual([]);
    } finally {
      await dataSource.destroy();
    }
  });

  it('keeps the catalog as the migration made it when the app synchronizes', async () => {
    await boot(db);
    const migrated = await catalog(db);
    await boot(db, { synchronize: true });
    expect(await catalog(db)).toEqual(migrated);
    expect(JSON.stringify(migrated)).toContain('fillfactor=90');
  });
});
