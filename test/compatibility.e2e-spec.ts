import type { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import { DataSource, type DataSourceOptions } from 'typeorm';
import { IdempotencyConfigurationError, IdempotencyModule, IdempotencyRecord, idempotencyMigrations } from '../src/idempotency/index.js';
import { installedVersions } from '../src/idempotency/module/installed-versions.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

vi.mock('../src/idempotency/module/installed-versions.js', { spy: true });

/**
 * IdempotencyModule refuses to start where it cannot keep its guarantee: on
 * a Nest or TypeORM outside the ranges it supports, and where the handler's
 * writes would not join the request's transaction (a TypeORM whose internals
 * changed). Runs on TypeORM 1.x and 0.3 (vitest.config.ts); on 0.3, the
 * versions read are still the root's, as Node resolves them past Vite's alias,
 * while the join is proved on the TypeORM loaded.
 */
describe('the startup check of Nest, TypeORM and the transaction join', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });
  afterEach(() => {
    vi.mocked(installedVersions).mockRestore();
  });

  /**
   * Initialises an app with the module on the test database; `adjust` changes
   * its DataSource once initialised. Returns the error it failed with, if any.
   */
  async function startupError(adjust: (dataSource: DataSource) => void = () => undefined, poolSize = 10): Promise<Error | undefined> {
    const options: DataSourceOptions = { type: 'postgres', url: db.url, entities: [IdempotencyRecord], migrations: idempotencyMigrations, migrationsRun: true, poolSize };
    const moduleRef = await Test.createTestingModule({
      imports: [
        TypeOrmModule.forRootAsync({
          useFactory: () => options,
          dataSourceFactory: async () => {
            const dataSource = await new DataSource(options).initialize();
            adjust(dataSource);
            return dataSource;
          },
        }),
        IdempotencyModule.forRoot({ tenant: 'shared', reaper: false }),
      ],
    }).compile();
    const app: INestApplication = moduleRef.createNestApplication({ logger: false });
    try {
      await app.init();
      return undefined;
    } catch (error) {
      return error as Error;
    } finally {
      const dataSource = moduleRef.get<DataSource>(getDataSourceToken());
      await app.close().catch(() => undefined);
      if (dataSource.isInitialized) await dataSource.destroy();
    }
  }

  it('starts on the installed versions, where the join works', async () => {
    expect(await startupError()).toBeUndefined();
  });

  // In forRoot() and forRootAsync(), as the app's module is defined: on TypeORM 0.2 Nest's scan of the modules fails before any
  // onModuleInit() runs (test/fixtures/unsupported-nest9-typeorm02 shows it on the packed package).
  it.each([
    ['typeorm', '0.2.45'],
    ['typeorm', '2.0.0'],
    ['@nestjs/common', '9.4.3'],
    ['@nestjs/core', '13.0.0'],
  ])('refuses %s %s in forRoot() and forRootAsync(), naming the versions found and the ranges supported', (name, version) => {
    const installed = { ...installedVersions(), [name]: version };
    vi.mocked(installedVersions).mockReturnValue(installed);
    for (const define of [() => IdempotencyModule.forRoot({ tenant: 'shared' }), () => IdempotencyModule.forRootAsync({ useFactory: () => ({ tenant: 'shared' as const }) })]) {
      expect(define).toThrow(IdempotencyConfigurationError);
      expect(define).toThrow(`${name} ${version} is outside the versions it supports`);
      expect(define).toThrow(`Found @nestjs/common ${installed['@nestjs/common']}, @nestjs/core ${installed['@nestjs/core']}, typeorm ${installed.typeorm}`);
      expect(define).toThrow('It supports @nestjs/common ^10.0.0 || ^11.0.0 || ^12.0.0, @nestjs/core ^10.0.0 || ^11.0.0 || ^12.0.0, typeorm ^0.3.0 || ^1.0.0');
    }
  });

  it('names every peer outside its range at once', () => {
    vi.mocked(installedVersions).mockReturnValue({ '@nestjs/common': '9.4.3', '@nestjs/core': '9.4.3', typeorm: '0.2.45' });
    expect(() => IdempotencyModule.forRoot({ tenant: 'shared' })).toThrow('@nestjs/common 9.4.3 and @nestjs/core 9.4.3 and typeorm 0.2.45 are outside the versions it supports');
  });

  /** What a release that stopped reading the manager's queryRunner would do: each query on a connection of its own. */
  const managerOnItsOwn = (dataSource: DataSource) => {
    dataSource.manager.query = async (sql: string, parameters?: unknown[]) => {
      const runner = dataSource.createQueryRunner();
      try {
        return await runner.query(sql, parameters);
      } finally {
        await runner.release();
      }
    };
  };

  it('refuses a TypeORM whose default manager no longer runs on the QueryRunner the join gives it', async () => {
    const error = await startupError(managerOnItsOwn);
    expect(error?.message).toMatch(/writes would not join the request's transaction on this TypeORM\. Inside a transaction, dataSource\.manager\.query\(\) .* ran on backend \d+, not the transaction's \d+/);
    expect(error?.message).not.toContain('dataSource.query() ran');
    expect(error?.message).toContain(`typeorm ${installedVersions().typeorm}`);
  });

  it('refuses it rather than wait for good on a pool of one connection, which the check holds', async () => {
    const error = await startupError(managerOnItsOwn, 1);
    expect(error?.message).toMatch(/dataSource\.manager\.query\(\) .* waited 5 s for a connection of its own/);
  });

  it('starts when the database ends the check’s connection under it (a restart, a failover): the check runs again on another', async () => {
    let ended = 0;
    const error = await startupError((dataSource) => {
      const createQueryRunner = dataSource.createQueryRunner.bind(dataSource);
      dataSource.createQueryRunner = (...args: Parameters<DataSource['createQueryRunner']>) => {
        const runner = createQueryRunner(...args);
        const query = runner.query.bind(runner);
        // The check's first statement in its transaction: its backend is terminated instead, as an operator or a failover would.
        runner.query = ((sql: string, ...rest: unknown[]) =>
          sql === 'SELECT pg_backend_pid() AS pid' && ended++ === 0 ? query('SELECT pg_terminate_backend(pg_backend_pid())') : query(sql, ...(rest as []))) as typeof runner.query;
        return runner;
      };
    });
    expect(ended).toBeGreaterThan(1);
    expect(error).toBeUndefined();
  });

  it('refuses a DataSource whose own query() does not take the QueryRunner it is given', async () => {
    const error = await startupError((dataSource) => {
      const query = dataSource.query.bind(dataSource);
      dataSource.query = (sql: string, parameters?: unknown[]) => query(sql, parameters);
    });
    expect(error?.message).toMatch(/dataSource\.query\(\) ran on backend \d+, not the transaction's \d+/);
  });
});
