import {
  applyDecorators,
  Body,
  CallHandler,
  Controller,
  ExecutionContext,
  Get,
  Inject,
  type INestApplication,
  type MiddlewareConsumer,
  Module,
  type ModuleMetadata,
  type NestInterceptor,
  type NestModule,
  type PipeTransform,
  Post,
  RequestTimeoutException,
  type Type,
  UseInterceptors,
} from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import { getDataSourceToken, getRepositoryToken, TypeOrmModule, type TypeOrmModuleOptions } from '@nestjs/typeorm';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { catchError, type Observable, throwError, timeout, TimeoutError } from 'rxjs';
import request from 'supertest';
import { Column, DataSource, type DataSourceOptions, Entity, type EntityTarget, type ObjectLiteral, PrimaryGeneratedColumn, type Repository } from 'typeorm';
import type { TestDatabase } from './test-database.js';

/** The package's public API, typed by its sources. */
export type Library = typeof import('../../src/idempotency/index.js');

/**
 * The package as `npm pack` packs it: the ES build's entry point, the file
 * the `exports` map gives `import 'nest-idempotency'` (npm run build writes
 * it). Loaded by path, since a package cannot be imported by its own name
 * from inside its repository; the first load of a build in a process is the
 * one every entry point hands out (scripts/lib-entries.mjs).
 */
export const lib: Library = await import(new URL('../../dist/lib/esm/index.js', import.meta.url).href);
/** The outbox's entry point of the same build (`nest-idempotency/outbox`). */
export const outboxLib: typeof import('../../src/idempotency/outbox/index.js') = await import(new URL('../../dist/lib/esm/outbox.js', import.meta.url).href);

/**
 * Whether this suite runs on TypeORM 1.x (the `typeorm-1` project) rather
 * than 0.3 (the `typeorm-0.3` project, vitest.config.ts). 1.x dropped the
 * DataSource's deprecated `connect()`; asking so costs nothing, where loading
 * the other TypeORM to compare classes would cost a second.
 */
export const ON_TYPEORM_1 = !('connect' in DataSource.prototype);

// The build must run on the TypeORM this suite and its app run on, or the suite proves nothing about that version.
// The module finds the app's DataSource by its class (@nestjs/typeorm's token of the default DataSource), taken
// from the `typeorm` the build imports; this is the build's own module, in the build's module graph.
const buildDataSource: typeof import('../../src/idempotency/transactions/idempotency-data-source.js') = await import(
  new URL('../../dist/lib/esm/src/idempotency/transactions/idempotency-data-source.js', import.meta.url).href
);
if (buildDataSource.dataSourceTokenOf('default') !== DataSource) {
  throw new Error(`the package build loads another TypeORM than this suite (${ON_TYPEORM_1 ? '1.x' : '0.3'}): see server.deps in vitest.config.ts`);
}

/** A row the handlers write: a label, and which step of which execution of the handler wrote it. */
@Entity({ name: 'faithful_rows' })
export class FaithfulRow {
  @PrimaryGeneratedColumn()
  id: number;

  @Column('text')
  label: string;

  @Column('text', { nullable: true })
  step: string | null;

  @Column('int', { nullable: true })
  execution: number | null;
}

/** The table of `FaithfulRow`, with no unique constraint: a write that runs twice shows as two rows. */
export const FAITHFUL_ROWS_SCHEMA = `CREATE TABLE faithful_rows (id serial PRIMARY KEY, label text NOT NULL, step text, execution int)`;

/** Which of the two copies of a handler a request goes to. */
export type Twin = 'with' | 'without';
/** Both twins, `with` first. */
export const TWINS: readonly Twin[] = ['with', 'without'];

/** What a handler reaches the database and the module by, as an app's services would be injected with. */
export interface HandlerContext {
  dataSource: DataSource;
  tx: InstanceType<Library['IdempotencyTransactionHost']>;
  /** The `@InjectRepository(entity)` repository. */
  repository<T extends ObjectLiteral>(entity: EntityTarget<T>): Repository<T>;
  get<T>(token: Type<T>): T;
}

/**
 * `@Idempotent()`'s options, and the route option issue 33 asks for
 * (`isolation`): a test of it compiles whether or not the package has it yet.
 */
export type RouteOptions = NonNullable<Parameters<Library['Idempotent']>[0]> & { isolation?: 'READ COMMITTED' | 'REPEATABLE READ' | 'SERIALIZABLE' };

/** One handler, served twice by a controller: under `@Idempotent()` and bare. */
export interface PairedRoute {
  /** The controller's path: the routes are `<path>/with` and `<path>/without`. */
  path: string;
  handle(context: HandlerContext, body: any): unknown;
  /** Options of `@Idempotent()` on the `with` route. Default none: the module's defaults. */
  idempotent?: RouteOptions;
  /** Interceptors bound on both routes, inside `@Idempotent()` on the `with` one. */
  inside?: NestInterceptor[];
  /** Pipes of the body parameter. */
  bodyPipes?: PipeTransform[];
  /** Default POST. */
  method?: 'GET' | 'POST';
}

/**
 * A controller serving `route.handle` twice: `<path>/with` under
 * `@Idempotent()`, `<path>/without` without it, so that each case can be
 * compared with what the same code does without the module.
 */
function pairedController(route: PairedRoute): Type {
  const Method = route.method === 'GET' ? Get : Post;
  const inside = route.inside?.length ? [UseInterceptors(...route.inside)] : [];
  const pipes = route.bodyPipes ?? [];

  // As `@UseInterceptors(...inside)` written above `@Idempotent()`: the module's interceptor runs outside them.
  @Controller(route.path)
  class PairedController {
    constructor(@Inject(ModuleRef) private readonly moduleRef: ModuleRef) {}

    @Method('with')
    @applyDecorators(lib.Idempotent(route.idempotent), ...inside)
    withModule(@Body(...pipes) body: unknown) {
      return route.handle(this.context(), body);
    }

    @Method('without')
    @applyDecorators(...inside)
    withoutModule(@Body(...pipes) body: unknown) {
      return route.handle(this.context(), body);
    }

    private context(): HandlerContext {
      const get = <T>(token: unknown) => this.moduleRef.get<T>(token as Type<T>, { strict: false });
      return { dataSource: get(getDataSourceToken()), tx: get(lib.IdempotencyTransactionHost), repository: (entity) => get(getRepositoryToken(entity as Type)), get };
    }
  }
  Object.defineProperty(PairedController, 'name', { value: `PairedController(${route.path})` });
  return PairedController;
}

/** A Nest app on Express with the module's default options, listening on a loopback port. */
export interface FaithfulApp {
  app: INestApplication;
  url: string;
  close(): Promise<void>;
}

/** What an app of `startFaithfulApp()` is made of, besides the module with its defaults. */
export interface FaithfulAppOptions {
  db: TestDatabase;
  routes: PairedRoute[];
  /** The app's entities, besides the module's record. */
  entities?: Function[];
  /** DataSource options over the suite's (`isolationLevel`, `subscribers`, `extra`). */
  dataSource?: Partial<TypeOrmModuleOptions>;
  /** Builds the DataSource, as `TypeOrmModule.forRootAsync({ dataSourceFactory })` does (typeorm-transactional's `addTransactionalDataSource()`). */
  dataSourceFactory?: (options: DataSourceOptions) => Promise<DataSource>;
  /** More modules of the app, e.g. `IdempotencyOutboxModule.forRoot()`. */
  imports?: ModuleMetadata['imports'];
  /** Middleware of the routes' module: runs after Nest's body parser, before the routes' interceptors. */
  middleware?: (consumer: MiddlewareConsumer, controllers: Type[]) => void;
  /** Runs on the app before it listens, e.g. `useGlobalInterceptors`. */
  configure?: (app: INestApplication) => void;
}

/** Builds and starts an app serving `routes`, on `IdempotencyModule.forRoot()` with no options but `tenant: 'shared'`. */
export async function startFaithfulApp(options: FaithfulAppOptions): Promise<FaithfulApp> {
  const entities = options.entities ?? [FaithfulRow];
  const controllers = options.routes.map(pairedController);

  @Module({ imports: [TypeOrmModule.forFeature(entities)], controllers })
  class FaithfulRoutesModule implements NestModule {
    configure(consumer: MiddlewareConsumer): void {
      options.middleware?.(consumer, controllers);
    }
  }

  const typeOrmOptions = {
    type: 'postgres',
    url: options.db.url,
    entities: [lib.IdempotencyRecord, ...entities],
    migrations: lib.idempotencyMigrations,
    migrationsRun: true,
    ...options.dataSource,
  } as TypeOrmModuleOptions;
  const { dataSourceFactory } = options;
  const moduleRef = await Test.createTestingModule({
    imports: [
      dataSourceFactory
        ? TypeOrmModule.forRootAsync({ useFactory: () => typeOrmOptions, dataSourceFactory: (dataSourceOptions) => dataSourceFactory(dataSourceOptions!) })
        : TypeOrmModule.forRoot(typeOrmOptions),
      lib.IdempotencyModule.forRoot({ tenant: 'shared' }),
      ...(options.imports ?? []),
      FaithfulRoutesModule,
    ],
  }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  options.configure?.(app);
  await app.listen(0, '127.0.0.1');
  return { app, url: await app.getUrl(), close: () => app.close() };
}

/** An answer, or `'no answer'` when none came within the client's timeout. */
export interface Answer {
  status: number | 'no answer';
  headers: Record<string, string>;
  body: any;
  text: string;
}

/** Sends `body` to one twin of a paired route, with an `Idempotency-Key` (`key`, or a fresh one). */
export async function send(app: FaithfulApp, path: string, twin: Twin, body: object = {}, options: { key?: string; method?: 'GET' | 'HEAD' | 'POST'; timeoutMs?: number; headers?: Record<string, string> } = {}): Promise<Answer> {
  const method = (options.method ?? 'POST').toLowerCase() as 'get' | 'head' | 'post';
  let call = request(app.url)[method](`/${path}/${twin}`).set('Idempotency-Key', options.key ?? randomUUID());
  for (const [name, value] of Object.entries(options.headers ?? {})) call = call.set(name, value);
  if (method === 'post') call = call.send(body);
  try {
    const answer = await call.timeout(options.timeoutMs ?? 10_000);
    return { status: answer.status, headers: answer.headers as Record<string, string>, body: answer.body, text: answer.text };
  } catch (error) {
    if ((error as { timeout?: number }).timeout) return { status: 'no answer', headers: {}, body: undefined, text: '' };
    throw error;
  }
}

let labels = 0;
/** A label no other test of the file uses. */
export const uniqueLabel = (name: string) => `${name}-${++labels}`;

/**
 * Nest's documented `TimeoutInterceptor` (docs.nestjs.com/interceptors,
 * "More operators"), its time a parameter: RxJS `timeout()`, and a 408 in
 * place of the `TimeoutError`.
 */
export class TimeoutInterceptor implements NestInterceptor {
  constructor(private readonly ms: number) {}

  intercept(_context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(
      timeout(this.ms),
      catchError((err) => (err instanceof TimeoutError ? throwError(() => new RequestTimeoutException()) : throwError(() => err))),
    );
  }
}

/**
 * Waits until `parties` callers have arrived under `name`, or `ms` have
 * passed: two concurrent requests meet here so that both have read (or
 * locked) before either goes on, whatever the machine's load. A lone
 * caller (a retry) goes on after `ms`.
 */
export async function meet(name: string, parties: number, ms: number): Promise<void> {
  let waiting = meetings.get(name);
  if (!waiting) {
    let resolve!: () => void;
    const all = new Promise<void>((settle) => (resolve = settle));
    waiting = { arrived: 0, all, resolve };
    meetings.set(name, waiting);
  }
  if (++waiting.arrived >= parties) {
    meetings.delete(name);
    waiting.resolve();
  }
  await Promise.race([waiting.all, sleep(ms)]);
}
const meetings = new Map<string, { arrived: number; all: Promise<void>; resolve: () => void }>();

/** Polls `check` every 10 ms until it returns true or `ms` have passed; returns its last answer. */
export async function eventually(check: () => boolean | Promise<boolean>, ms = 2000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) return false;
    await sleep(10);
  }
  return true;
}

/**
 * Sets a parameter's default on the suite's database, for the connections
 * opened after it (start the app after). `value` is SQL, e.g. `'1s'`.
 */
export async function setDatabaseDefault(db: TestDatabase, name: string, value: string): Promise<void> {
  const [{ database }] = await db.query<{ database: string }>(`SELECT current_database() AS database`);
  await db.query(`ALTER DATABASE "${database}" SET ${name} = ${value}`);
}

/** Takes back `setDatabaseDefault()`. */
export async function resetDatabaseDefault(db: TestDatabase, name: string): Promise<void> {
  const [{ database }] = await db.query<{ database: string }>(`SELECT current_database() AS database`);
  await db.query(`ALTER DATABASE "${database}" RESET ${name}`);
}

/** How many rows of `table` match `where`. */
export async function countRows(db: TestDatabase, table: string, where: string, params: unknown[]): Promise<number> {
  return Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM ${table} WHERE ${where}`, params))[0].n);
}
