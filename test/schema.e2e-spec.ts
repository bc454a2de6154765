import { Test } from '@nestjs/testing';
import { DataSource } from 'typeorm';
import { IdempotencyRecord, idempotencyMigrations } from '../src/idempotency/index.js';
import { type LedgerDataSourceOptions, ledgerAppModules } from './support/ledger-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

/** Initialises the ledger app without HTTP, then closes it. */
async function boot(db: TestDatabase, dataSource: LedgerDataSourceOptions = {}): Promise<void> {
  const moduleRef = await Test.createTestingModule({ imports: ledgerAppModules(db.url, { reaper: false }, dataSource) }).compile();
  moduleRef.useLogger(false);
  try {
    await moduleRef.init();
  } finally {
    await moduleRef.close();
  }
}

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
