import { Inject, Injectable, type InjectionToken, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
// A namespace import: a named one would stop the ES build from linking on a TypeORM without DataSource (0.2), before
// IdempotencyModule.forRoot() could refuse that version by name.
import * as typeorm from 'typeorm';
import type { DataSource, QueryRunner } from 'typeorm';
import { pgPoolOf } from '../driver/pg-pool.js';
import { IdempotencyConfigurationError } from '../errors/idempotency.exceptions.js';
import { type IsolationLevel, isAtLeast, isolationLevelOf, type ResolvedModuleOptions } from '../options/idempotency.options.js';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../options/idempotency.tokens.js';

/**
 * The injection token @nestjs/typeorm gives the DataSource of a connection
 * name: the `DataSource` class for `'default'`, `` `${name}DataSource` ``
 * otherwise. This mirrors `getDataSourceToken(name)` instead of importing it,
 * so that the module does not need @nestjs/typeorm at all (an app may provide
 * its DataSource itself, under any token); a contract test holds the two
 * together.
 */
export function dataSourceTokenOf(name: string): InjectionToken {
  return name === 'default' ? typeorm.DataSource : `${name}DataSource`;
}

/**
 * The DataSource the module serves (the `dataSource` option), for the whole
 * flow: claims, fast replays, phased operations, the reaper and the
 * completer all reach it through this one provider.
 *
 * It is looked up by its token rather than injected: with `forRootAsync()`
 * the token is only known once the options resolve, and TypeORM's DataSource
 * provider (an async factory that connects) may finish after this module's
 * providers are built. Every provider of the app exists by the first
 * lifecycle hook, where it is looked up, so a wrong name fails the startup.
 */
@Injectable()
export class IdempotencyDataSource implements OnModuleInit, OnApplicationShutdown {
  private resolved?: DataSource;
  /** The default level of each connection the pool made since startup, read as it connected: see `isolationOn`. */
  private readonly connectionLevels = new WeakMap<object, IsolationLevel | undefined | Promise<IsolationLevel | undefined>>();
  /** Stops reading new connections' levels; set where the connections' default decides the app's level. */
  private stopReadingLevels?: () => void;
  private appIsolation: IsolationLevel = 'READ COMMITTED';
  private connectionIsolation: IsolationLevel = 'READ COMMITTED';
  private libraryIsolation?: IsolationLevel;
  private deferred: readonly string[] = [];

  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedModuleOptions,
    private readonly moduleRef: ModuleRef,
  ) {}

  get dataSource(): DataSource {
    return (this.resolved ??= this.lookUp());
  }

  /**
   * The isolation level the app's own transactions get on `runner`'s
   * connection, and so the one an idempotent request's transaction starts
   * at there: the DataSource's `isolationLevel` (TypeORM 1.x), else the
   * connection's `default_transaction_isolation` (server, database, role and
   * connection settings), read as the pool made it, or at startup for the
   * connections made before; or the level a transaction library of the
   * app's starts its own at, where stricter (see `requireIsolation`). A
   * default changed while the app runs (`ALTER DATABASE … SET
   * default_transaction_isolation`) reaches the connections made since, and
   * the app's own transactions on them: the request's follows it, as they do.
   */
  isolationOn(runner: QueryRunner): IsolationLevel | Promise<IsolationLevel> {
    if (!this.stopReadingLevels) return this.raised(undefined);
    // A connection that cannot be had fails the claim, which says why: here it only leaves the level as it was.
    return runner.connect().then(
      (connection: object) => {
        const read = this.connectionLevels.get(connection);
        return read instanceof Promise ? read.then((level) => this.raised(level)) : this.raised(read);
      },
      () => this.raised(undefined),
    );
  }

  /** A connection's level (the app's where unread), raised to the transaction library's where that is stricter. */
  private raised(read: IsolationLevel | undefined): IsolationLevel {
    const level = read ?? this.appIsolation;
    const library = this.libraryIsolation;
    return library && !isAtLeast(level, library) ? library : level;
  }

  /**
   * The level a statement sent outside any transaction runs at on this
   * DataSource's connections: the database's `default_transaction_isolation`
   * for them, read once at startup.
   */
  get statementIsolation(): IsolationLevel {
    return this.connectionIsolation;
  }

  /**
   * Raises the level requests start at (`isolationOn`) to `level`, the
   * default level of a transaction library of the app's on this DataSource
   * (`TransactionLibraries`): its transactions, joining the request's as
   * savepoints, refuse one below it.
   */
  requireIsolation(level: IsolationLevel): void {
    if (!this.libraryIsolation || isAtLeast(level, this.libraryIsolation)) this.libraryIsolation = level;
  }

  /**
   * The database's constraints checked at COMMIT (INITIALLY DEFERRED),
   * qualified and quoted, read once at startup: each unit of a request's
   * transaction checks them at its end, as its COMMIT would have. One added
   * later is checked at the request's COMMIT, as before.
   */
  get deferredConstraints(): readonly string[] {
    return this.deferred;
  }

  async onModuleInit(): Promise<void> {
    const dataSource = (this.resolved ??= this.lookUp());
    // The schema check fails such a boot, and says why.
    if (!dataSource.isInitialized) return;
    const [row] = (await dataSource.query(
      `SELECT current_setting('default_transaction_isolation') AS isolation,
              ARRAY(SELECT DISTINCT format('%I.%I', n.nspname, c.conname) FROM pg_catalog.pg_constraint c
                      JOIN pg_catalog.pg_namespace n ON n.oid = c.connamespace WHERE c.condeferred ORDER BY 1) AS deferred`,
    )) as Array<{ isolation: string; deferred: string[] }>;
    // TypeORM 1.x starts its transactions at the DataSource's isolationLevel; 0.3 has no such option, and ignores one given (it still has the connect() 1.x dropped).
    const configured = 'connect' in dataSource ? undefined : (dataSource.options as { isolationLevel?: unknown }).isolationLevel;
    this.connectionIsolation = isolationLevelOf(row?.isolation) ?? this.connectionIsolation;
    this.appIsolation = isolationLevelOf(configured) ?? this.connectionIsolation;
    this.deferred = row?.deferred ?? [];
    if (isolationLevelOf(configured) === undefined) this.readLevelsOfNewConnections(dataSource);
  }

  onApplicationShutdown(): void {
    this.stopReadingLevels?.();
  }

  /** Reads the default level of each connection the pool makes from now on, first thing on it. */
  private readLevelsOfNewConnections(dataSource: DataSource): void {
    const pool = pgPoolOf<ConnectionClient>(dataSource);
    if (!pool?.on || !pool.off) return;
    // Kept as the promise until it settles, then as the level: a request on a connection read long ago does not wait on it.
    const read = (client: ConnectionClient) =>
      this.connectionLevels.set(
        client,
        client.query(READ_DEFAULT_LEVEL).then(
          ({ rows }) => this.settledLevel(client, isolationLevelOf(rows[0]?.isolation)),
          () => this.settledLevel(client, undefined),
        ),
      );
    pool.on('connect', read);
    this.stopReadingLevels = () => pool.off!('connect', read);
  }

  private settledLevel(client: object, level: IsolationLevel | undefined): IsolationLevel | undefined {
    this.connectionLevels.set(client, level);
    return level;
  }

  private lookUp(): DataSource {
    const option = this.options.dataSource;
    // A string is a connection name; `getDataSourceToken(name)`'s own string is accepted as given too.
    const tokens = typeof option === 'string' ? [dataSourceTokenOf(option), option] : [option];
    for (const token of tokens) {
      const found = this.find(token);
      if (found === undefined) continue;
      if (!isDataSource(found)) throw new IdempotencyConfigurationError(`IdempotencyModule: the provider ${describe(token)} is not a TypeORM DataSource.`);
      return found;
    }
    throw new IdempotencyConfigurationError(
      `IdempotencyModule: no DataSource for dataSource: ${describe(option)} (looked up ${tokens.map(describe).join(', ')}). ` +
        `Pass the name given to TypeOrmModule.forRoot({ name }), or the injection token of a DataSource provider; leave it out for the default DataSource.`,
    );
  }

  private find(token: InjectionToken): unknown {
    try {
      return this.moduleRef.get(token, { strict: false }) ?? undefined;
    } catch {
      return undefined; // not a provider of the app
    }
  }
}

/** A connection of the pool, as far as its level is read. */
interface ConnectionClient {
  query(text: string): Promise<{ rows: Array<{ isolation?: string }> }>;
}

const READ_DEFAULT_LEVEL = `SELECT current_setting('default_transaction_isolation') AS isolation`;

function isDataSource(value: unknown): value is DataSource {
  return typeof (value as DataSource).createQueryRunner === 'function' && typeof (value as DataSource).manager === 'object';
}

function describe(token: InjectionToken): string {
  return typeof token === 'function' ? token.name : typeof token === 'symbol' ? token.toString() : JSON.stringify(token);
}
