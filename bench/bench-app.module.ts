import { type DynamicModule, Global, Module, ValidationPipe } from '@nestjs/common';
import { APP_PIPE } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource, type DataSourceOptions } from 'typeorm';
import { VALIDATION_OPTIONS } from '../src/demo/app.module.js';
import { dataSourceOptions } from '../src/demo/database/data-source-options.js';
import { IdempotencyModule, type IdempotencyModuleOptions } from '../src/idempotency/index.js';
import { IdempotencyOutboxModule } from '../src/idempotency/outbox/index.js';
import { BENCH_TENANT } from './bare-order-transaction.js';
import { BenchOrdersModule } from './bench-orders.controller.js';
import { BenchOutboxEvent, CreateBenchOutboxEvents1764400099000 } from './outbox-row-order.js';
import { type PeerOptions, PeerOrdersModule } from './peer-orders.controller.js';

/** What the bench app is started with. */
export interface BenchAppOptions {
  databaseUrl: string;
  /** Set when a Redis server answers: adds the peer's route. */
  peer?: PeerOptions;
  /**
   * Module options that survive JSON, e.g. `replayCacheSize: 0`, a reaper
   * schedule or `encryption` with base64 keys; unset ones keep the module's
   * defaults.
   */
  idempotency?: Pick<IdempotencyModuleOptions, 'replayCacheSize' | 'readFirst' | 'reaper' | 'retention' | 'wait' | 'encryption' | 'unitSavepoints'>;
  /** node-postgres pipelining (`extra.pipeline`) on the app's DataSource; default: the demo's, on. */
  pipeline?: boolean;
  /** Connections in the app's pool (`extra.max`); default: the demo's `DB_POOL_SIZE`. */
  poolSize?: number;
  /**
   * Apps mounted beside the main one in the same process, by path prefix,
   * each with module options of its own: `{ 'cache-off': { replayCacheSize:
   * 0 } }` answers `/cache-off/bench/orders/idempotent` with the replay cache
   * off. They serve every bench route but the peer's, on the main app's
   * DataSource (its pool), and run no reaper: the main app's reaps the same
   * table.
   */
  mounted?: Record<string, BenchAppOptions['idempotency']>;
}

/**
 * The bench app: the demo's data source and IdempotencyModule, the demo's
 * ValidationPipe settings, and the bench routes instead of the demo's.
 */
@Module({})
export class BenchAppModule {
  /** With `lent`, the app uses that DataSource, which stays its owner's to close, instead of one of its own. */
  static forRoot(options: BenchAppOptions, lent?: DataSource): DynamicModule {
    return {
      module: BenchAppModule,
      imports: [
        lent ? LentDataSourceModule.forRoot(lent) : TypeOrmModule.forRoot(withConnections(withBenchTables(dataSourceOptions(options.databaseUrl)), options)),
        IdempotencyModule.forRoot({ ...options.idempotency, tenant: () => BENCH_TENANT }),
        // The orders write their event to the outbox; no relay runs here (bench:relay measures it).
        IdempotencyOutboxModule.forRoot({}),
        BenchOrdersModule,
        ...(options.peer ? [PeerOrdersModule.forRoot(options.peer)] : []),
      ],
      providers: [
        // The demo's AppModule does not export its pipe, so its settings are repeated here.
        { provide: APP_PIPE, useValue: new ValidationPipe(VALIDATION_OPTIONS) },
      ],
    };
  }
}

/**
 * The demo's DataSource options, with the pipelining and pool size the
 * options set, and a pool that keeps its connections. A run alternates
 * routes that use the database with routes that do not (the floor, cached
 * replays), and pg's pool closes connections idle for 10 s: the windows
 * after such a stretch paid for new backends, their cold caches and their
 * prepared statements, up to 12% more PostgreSQL CPU per request.
 */
function withConnections(dataSource: DataSourceOptions, { pipeline, poolSize }: Pick<BenchAppOptions, 'pipeline' | 'poolSize'>): DataSourceOptions {
  const extra = { ...dataSource.extra, idleTimeoutMillis: 0, ...(pipeline !== undefined && { pipeline }), ...(poolSize !== undefined && { max: poolSize }) };
  return { ...dataSource, extra } as DataSourceOptions;
}

/** The demo's entities and migrations, and the bench's own table: the outbox row of the `outbox-row` routes. */
function withBenchTables(dataSource: DataSourceOptions): DataSourceOptions {
  return {
    ...dataSource,
    entities: [...((dataSource.entities as unknown[]) ?? []), BenchOutboxEvent],
    migrations: [...((dataSource.migrations as unknown[]) ?? []), CreateBenchOutboxEvents1764400099000],
  } as DataSourceOptions;
}

/**
 * Another app's DataSource, under the token TypeOrmModule would give it: a
 * mounted app then shares the main app's pool, and only the main app's
 * TypeOrmModule closes it.
 */
@Global()
@Module({})
class LentDataSourceModule {
  static forRoot(dataSource: DataSource): DynamicModule {
    return { module: LentDataSourceModule, providers: [{ provide: DataSource, useValue: dataSource }], exports: [DataSource] };
  }
}
