import { Test } from '@nestjs/testing';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { EXIT, runCli } from '../src/idempotency/cli/cli.js';
import { IdempotencyConfigurationError, type IdempotencyModuleOptions, IdempotencyRecord, IdempotencyReaper, idempotencyMigrations } from '../src/idempotency/index.js';
import { startApp } from './support/http-app.js';
import { LEDGER_SCHEMA, type LedgerDataSourceOptions, ledgerAppModules } from './support/ledger-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

const MIGRATION = 'CreateIdempotencyRecords1764400000000';

/** Initialises the ledger app (no HTTP: the check does not depend on an adapter), then closes it. */
async function boot(db: TestDatabase, dataSource: LedgerDataSourceOptions = {}, options: Partial<IdempotencyModuleOptions> = {}): Promise<void> {
  const moduleRef = await Test.createTestingModule({ imports: ledgerAppModules(db.url, { reaper: false, ...options }, dataSource) }).compile();
  moduleRef.useLogger(false);
  try {
    await moduleRef.init();
  } finally {
    await moduleRef.close();
  }
}

/** The boot's IdempotencyConfigurationError message. */
async function bootFailure(db: TestDatabase, dataSource: LedgerDataSourceOptions = {}, options: Partial<IdempotencyModuleOptions> = {}): Promise<string> {
  const error = await boot(db, dataSource, options).then(
    () => undefined,
    (error: unknown) => error,
  );
  expect(error).toBeInstanceOf(IdempotencyConfigurationError);
  return (error as Error).message;
}

/** Starts over: no table, no migration recorded, no schema of the tests' own. */
const reset = (db: TestDatabase) => db.query(`DROP TABLE IF EXISTS idempotency_records, idempotency_outbox, migrations; DROP SCHEMA IF EXISTS ledger_space CASCADE`);

/** A pool whose search_path starts with `ledger_space`: migrations run on it create the module's tables there. */
const IN_LEDGER_SPACE = { extra: { options: '-c search_path=ledger_space,public' } };

/**
 * Starts the ledger app over HTTP, sends a key twice, and answers both
 * answers and where its record is: the second must replay the first.
 */
async function recordAndReplay(db: TestDatabase, key: string, dataSource: LedgerDataSourceOptions, options: Partial<IdempotencyModuleOptions> = {}) {
  const running = await startApp({ imports: ledgerAppModules(db.url, { reaper: false, replayCacheSize: 0, ...options }, dataSource) });
  try {
    const send = () => Promise.resolve(request(running.url).post('/entries').set('Idempotency-Key', key).set('X-Tenant', 'acme').send({ label: key }));
    const [first, replay] = [await send(), await send()];
    const schemas = await db.query<{ schema: string }>(
      `SELECT c.relnamespace::regnamespace::text AS schema FROM pg_class c WHERE c.relname = 'idempotency_records' AND c.relkind = 'r' ORDER BY 1`,
    );
    const reaped = await running.app.get(IdempotencyReaper).reap(new Date(Date.now() + 3 * 24 * 60 * 60 * 1000));
    return { first, replay, schemas: schemas.map((row) => row.schema), reaped: reaped.deleted };
  } finally {
    await running.close();
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

  it('looks the table up on the search_path, where the migration put it', async () => {
    await db.query(`CREATE SCHEMA IF NOT EXISTS ledger_space`);
    const inLedgerSpace = { extra: { options: '-c search_path=ledger_space' } };
    await boot(db, inLedgerSpace);
    expect(await db.query(`SELECT 1 FROM pg_tables WHERE schemaname = 'ledger_space' AND tablename = 'idempotency_records'`)).toHaveLength(1);
    await expect(boot(db, { ...inLedgerSpace, migrationsRun: false })).resolves.toBeUndefined();
    expect(await bootFailure(db, { migrationsRun: false })).toContain('search_path (public)');
  });

  it('records and replays in the schema the migration put the table in, found at startup', async () => {
    await db.query(`CREATE SCHEMA ledger_space; ${LEDGER_SCHEMA}`);
    const { first, replay, schemas, reaped } = await recordAndReplay(db, 'in-ledger-space', IN_LEDGER_SPACE);
    expect([first.status, replay.status, replay.headers['idempotent-replayed'], replay.text]).toEqual([201, 201, 'true', first.text]);
    expect(schemas).toEqual(['ledger_space']);
    expect(reaped).toBe(1);
  });

  it('records and replays in the schema the `schema` option names, off the search_path, and refuses one without the table', async () => {
    await db.query(`CREATE SCHEMA ledger_space; ${LEDGER_SCHEMA}`);
    await boot(db, IN_LEDGER_SPACE);
    const offThePath = { migrationsRun: false };
    expect(await bootFailure(db, offThePath)).toContain('name that schema in IdempotencyModule\'s `schema` option');
    const { first, replay, schemas, reaped } = await recordAndReplay(db, 'named-schema', offThePath, { schema: 'ledger_space' });
    expect([first.status, replay.status, replay.headers['idempotent-replayed'], replay.text]).toEqual([201, 201, 'true', first.text]);
    expect(schemas).toEqual(['ledger_space']);
    expect(reaped).toBe(1);

    const message = await bootFailure(db, IN_LEDGER_SPACE, { schema: 'public' });
    expect(message).toContain('no table idempotency_records in the schema "public" (the `schema` option)');
    expect(message).toContain(`Run the migration ${MIGRATION} with that schema first on the DataSource's search_path`);
  });

  it('lets the CLI find the tables where DATABASE_URL\'s search_path does, or in --schema', async () => {
    await db.query(`CREATE SCHEMA ledger_space`);
    await boot(db, IN_LEDGER_SPACE);
    await db.query(`INSERT INTO ledger_space.idempotency_records (scope, operation, key, fingerprint, status, response_status, completed_at, expires_at)
                    VALUES ('tenant:acme', 'POST /entries', 'cli-schema', 'f', 'completed', 201, now(), now() + interval '1 day')`);
    const cli = async (url: string, ...args: string[]) => {
      const out: string[] = [];
      const err: string[] = [];
      const code = await runCli(args, { DATABASE_URL: url }, { out: (text) => out.push(text), err: (text) => err.push(text) });
      return { code, out: out.join('\n'), err: err.join('\n') };
    };
    const keysIn = (found: { out: string }) => JSON.parse(found.out).items.map((record: { key: string }) => record.key);
    expect(keysIn(await cli(db.url, '--json', '--schema', 'ledger_space', 'inspect', 'cli-schema'))).toEqual(['cli-schema']);
    const onItsPath = `${db.url}${db.url.includes('?') ? '&' : '?'}options=${encodeURIComponent('-c search_path=ledger_space')}`;
    expect(keysIn(await cli(onItsPath, '--json', 'inspect', 'cli-schema'))).toEqual(['cli-schema']);
    const lost = await cli(db.url, 'inspect', 'cli-schema');
    expect(lost.code).toBe(EXIT.usage);
    expect(lost.err).toContain('There is no table idempotency_records on DATABASE_URL\'s search_path (public): pass --schema');
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
