import { Injectable, type OnModuleInit } from '@nestjs/common';
import type { DataSource, ObjectLiteral, SelectQueryBuilder } from 'typeorm';
import { IdempotencyDataSource } from '../transactions/idempotency-data-source.js';
import { IdempotencyConfigurationError } from '../errors/idempotency.exceptions.js';
import { retriedOnLostConnection } from '../driver/database-errors.js';
import { installedVersions, satisfies, SUPPORTED_PEERS, type SupportedPeer } from './installed-versions.js';
import { IdempotencyTransactionHost } from '../transactions/transaction-host.js';

const BACKEND = 'SELECT pg_backend_pid() AS pid';
/** How long a statement may take: one that waits for a pool connection of its own (which a pool of one never frees while the check holds its connection) did not join. */
const PATH_TIMEOUT_MS = 5_000;
/** The same through a query builder: a FROM of one row, which TypeORM builds from a subquery (fromDummy() is not in every 0.3). */
const backendSelectedBy = (builder: SelectQueryBuilder<ObjectLiteral>) => builder.select('pg_backend_pid()', 'pid').from('(SELECT 1)', 'one_row').getRawOne();

/** The ways Nest code reaches the database without the module's manager, each asked for its connection's backend. */
const JOINED_PATHS: ReadonlyArray<readonly [path: string, askBackend: (dataSource: DataSource) => Promise<unknown>]> = [
  ['dataSource.manager.query() (the injected EntityManager, repositories)', (dataSource) => dataSource.manager.query(BACKEND)],
  ['dataSource.manager.createQueryBuilder()', (dataSource) => backendSelectedBy(dataSource.manager.createQueryBuilder())],
  ['dataSource.query()', (dataSource) => dataSource.query(BACKEND)],
  ['dataSource.createQueryBuilder()', (dataSource) => backendSelectedBy(dataSource.createQueryBuilder())],
  ['dataSource.transaction()', (dataSource) => dataSource.transaction((manager) => manager.query(BACKEND))],
];

/** `It supports @nestjs/common ^10.0.0 || ..., typeorm ^0.3.0 || ^1.0.0`: the ranges, for messages. */
const SUPPORTED_RANGES = `It supports ${Object.entries(SUPPORTED_PEERS)
  .map(([name, range]) => `${name} ${range}`)
  .join(', ')}`;

/** `Found @nestjs/common 11.1.6, @nestjs/core 11.1.6, typeorm 0.3.27`: the versions installed, for messages. */
function versionsFound(versions: Record<SupportedPeer, string | undefined> = installedVersions()): string {
  return `Found ${Object.entries(versions)
    .map(([name, version]) => `${name} ${version ?? '(version not found)'}`)
    .join(', ')}`;
}

/**
 * Throws when the installed Nest or TypeORM is outside the ranges the module
 * supports. `forRoot()` and `forRootAsync()` call it, so that it runs as the
 * app's module is defined, before Nest scans the modules: on TypeORM 0.2 the
 * scan itself fails, in `@nestjs/typeorm`, with a TypeError that names
 * neither the package nor the versions.
 */
export function refuseUnsupportedVersions(): void {
  const versions = installedVersions();
  const outside = (Object.keys(SUPPORTED_PEERS) as SupportedPeer[]).filter((name) => versions[name] !== undefined && !satisfies(versions[name]!, SUPPORTED_PEERS[name]));
  if (outside.length === 0) return;
  throw new IdempotencyConfigurationError(
    `IdempotencyModule cannot start: ${outside.map((name) => `${name} ${versions[name]}`).join(' and ')} ${outside.length > 1 ? 'are' : 'is'} outside the versions it supports. ` +
      `${versionsFound(versions)}. ${SUPPORTED_RANGES}. Install a supported version: see "Upgrading and compatibility" in the documentation (docs/upgrading.md).`,
  );
}

/**
 * Refuses to start wherever the transaction join
 * (transactions/transaction-join.ts, which relies on TypeORM's internals) does
 * not work. A Nest or TypeORM outside the supported ranges is refused earlier,
 * by `forRoot()` (`refuseUnsupportedVersions()`).
 * The join is proved, not assumed: inside a transaction made current as a
 * request's is, a statement down each path Nest code writes by must run on
 * that transaction's connection. Where one does not, a handler's writes
 * would commit on their own, apart from the recorded outcome, and a retry
 * would run them again, with no error anywhere. One connection and a few
 * round trips, once; the transaction is rolled back.
 */
@Injectable()
export class IdempotencyCompatibilityCheck implements OnModuleInit {
  constructor(
    private readonly served: IdempotencyDataSource,
    private readonly transactions: IdempotencyTransactionHost,
  ) {}

  async onModuleInit(): Promise<void> {
    // A lost connection proves nothing about the join: the check runs again, on another.
    const strays = await retriedOnLostConnection(() => this.strayPaths());
    if (strays.length > 0) {
      throw new IdempotencyConfigurationError(
        `IdempotencyModule cannot start: a handler's writes would not join the request's transaction on this TypeORM. ` +
          `Inside a transaction, ${strays.join('; ')}: they would commit on their own, apart from the recorded outcome, and run again on a retry. ` +
          `${versionsFound()}. ${SUPPORTED_RANGES}. TypeORM changed what the module relies on: pin the last version that started, and report these versions.`,
      );
    }
  }

  /** The paths whose statement ran on another connection than the transaction it was called in, each with what it ran on. */
  private async strayPaths(): Promise<string[]> {
    const dataSource = this.served.dataSource;
    // TypeOrmModule initialises its DataSource before providing it; IdempotencySchemaCheck says what to do when it did not.
    if (!dataSource.isInitialized) return [];
    const runner = dataSource.createQueryRunner();
    try {
      // After an await: IdempotencyTransactionHost, which this depends on, has joined the DataSource in its own onModuleInit by then.
      await runner.connect();
      await runner.startTransaction();
      const own = backendOf(await runner.query(BACKEND));
      const strays: string[] = [];
      for (const [path, askBackend] of JOINED_PATHS) {
        const ran = await within(PATH_TIMEOUT_MS, this.transactions.run(runner.manager, () => askBackend(dataSource)));
        if (ran === undefined) strays.push(`${path} waited ${PATH_TIMEOUT_MS / 1000} s for a connection of its own`);
        else if (backendOf(ran) !== own) strays.push(`${path} ran on backend ${backendOf(ran)}, not the transaction's ${own}`);
      }
      return strays;
    } finally {
      // TypeORM releases a runner whose connection failed: nothing is left to roll back, and trying would hide the failure.
      if (runner.isTransactionActive && !runner.isReleased) await runner.rollbackTransaction();
      await runner.release();
    }
  }
}

/** What `work` settles with, or undefined once `ms` have passed. */
async function within<T>(ms: number, work: Promise<T>): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<undefined>((resolve) => (timer = setTimeout(resolve, ms, undefined)));
  try {
    return await Promise.race([work, expired]);
  } finally {
    clearTimeout(timer);
  }
}

/** The backend pid of a `SELECT pg_backend_pid() AS pid`, as `query()` (rows) or `getRawOne()` (a row) returns it. */
function backendOf(result: unknown): number {
  const row = (Array.isArray(result) ? result[0] : result) as { pid: number | string };
  return Number(row.pid);
}
