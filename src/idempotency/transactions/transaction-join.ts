import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import { PoolConnectionRefusedError } from '../errors/idempotency.exceptions.js';
import { ATOMIC_METHODS } from './request-manager.js';
import { RequestTransaction } from './request-transaction.js';
import { LockWaitWatch } from './lock-wait-watch.js';
import { type Method, override, wrapMethod } from './wrap-method.js';
import { pgPoolOf } from '../driver/pg-pool.js';

/** The QueryRunner of the transaction the caller runs in, if any, on a given DataSource. */
type JoinableTransaction = () => QueryRunner | undefined;

interface Join {
  /** One per IdempotencyTransactionHost serving the DataSource (one per app, as a rule). */
  readonly sources: Set<JoinableTransaction>;
  restore(): void;
}

/** Set while the module takes a QueryRunner or a pool connection of its own (`asOwnWork`): the join leaves it alone. */
let ownWork = false;

const joins = new WeakMap<DataSource, Join>();

/**
 * Makes the DataSource's own paths join the caller's transaction.
 *
 * Why: Nest code writes through `@InjectRepository()` repositories, the
 * injected EntityManager, `dataSource.manager`, `dataSource.getRepository()`
 * and `dataSource.query()`. None of them knows the module's transaction, so
 * inside an idempotent request each took a pool connection of its own and
 * committed on its own: a handler that wrote and then threw kept its row.
 *
 * How, in TypeORM 1.1.1 and 0.3.31 (checked against their compiled code; the
 * join suites run on both): every operation of an EntityManager, and of every
 * Repository (whose `manager` is an own property set in its constructor, a
 * reference to the manager), runs on the manager's `queryRunner`; on the DataSource's default manager it is unset,
 * which means a fresh pool connection per operation. So an accessor on that
 * one manager object, returning the caller's QueryRunner, sends all of them
 * into the transaction: repositories of `getRepository()` and
 * `@InjectRepository()` (including `createQueryBuilder()`, `query()`,
 * `extend()`), `dataSource.manager`, and `dataSource.transaction()`, which
 * on a runner already in a transaction opens a savepoint. `dataSource.query()`
 * and `dataSource.createQueryBuilder()` take a QueryRunner argument instead,
 * so they get the caller's when given none. `save()`, `remove()`,
 * `softRemove()`, `recover()` and `transaction()` go to the caller's runner's
 * own manager, where a request's transaction makes each one a unit of its
 * own (`RequestTransaction`). `getRepository()` keeps building
 * its cached repositories without one, or a repository first asked for
 * inside a request would stay bound to that request's connection.
 * `createQueryRunner()`, which TypeORM itself calls wherever a manager or
 * query builder has no runner, answers inside a request a runner bound to
 * the request's transaction (`joinQueryRunner`): the QueryRunner
 * transaction of NestJS's documentation becomes a savepoint of the
 * request's.
 *
 * Narrow on purpose: instance properties of the DataSources the module
 * serves, nothing on any prototype. Outside a transaction (`joinable`
 * returns undefined) everything runs exactly as before; inside a
 * transaction of the app's own (`IdempotencyTransactionHost.run()`), a new runner is
 * a connection of its own, as without the module.
 *
 * @returns the undo: once every IdempotencyTransactionHost that joined a DataSource has
 * undone its join, the DataSource is as TypeORM made it.
 */
export function joinTransactions(dataSource: DataSource, joinable: JoinableTransaction): () => void {
  let join = joins.get(dataSource);
  if (!join) {
    const sources = new Set<JoinableTransaction>();
    join = { sources, restore: install(dataSource, () => firstOf(sources)) };
    joins.set(dataSource, join);
  }
  const joined = join;
  joined.sources.add(joinable);
  return () => {
    joined.sources.delete(joinable);
    if (joined.sources.size > 0 || joins.get(dataSource) !== joined) return;
    joined.restore();
    joins.delete(dataSource);
  };
}

/**
 * A QueryRunner of `dataSource`'s own, on a pool connection, whatever
 * transaction the caller runs in: the module's own transactions, and work
 * that outlives a committed request, start here.
 */
export function ownQueryRunner(dataSource: DataSource): QueryRunner {
  return asOwnWork(() => dataSource.createQueryRunner());
}

/**
 * Runs `take`, which takes a QueryRunner or a pool connection for the
 * module's own work (a read from the pool), as it would outside any
 * request, whatever request the caller runs in: synchronously, as TypeORM
 * and node-postgres take both.
 */
export function asOwnWork<T>(take: () => T): T {
  ownWork = true;
  try {
    return take();
  } finally {
    ownWork = false;
  }
}

/** The request transaction on `runner`, where it takes the handler's work now. */
function openRequest(runner: QueryRunner | undefined): RequestTransaction | undefined {
  const request = runner && RequestTransaction.of(runner);
  return request?.isOpen ? request : undefined;
}

/**
 * A connection taken from the pool inside a request (`driver.master.connect()`,
 * `pool.query()`, which takes one, TypeORM's `obtainMasterConnection()`)
 * is refused with `PoolConnectionRefusedError`: on a connection of its own,
 * a write would commit apart from the request, and a lock on a row the
 * request changed would wait for good. It cannot join instead: node-postgres
 * runs such a client's statements past the request's units and savepoints,
 * and its cursors hold the connection the request commits on.
 */
function joinPool(dataSource: DataSource, current: JoinableTransaction): Array<() => void> {
  const pool = pgPoolOf<unknown>(dataSource);
  if (typeof pool?.connect !== 'function') return [];
  return [
    wrapMethod(pool as { connect(...args: unknown[]): unknown }, 'connect', (connect) =>
      function (this: unknown, ...args: unknown[]) {
        if (ownWork || !openRequest(current())) return connect.apply(this, args);
        const refused = new PoolConnectionRefusedError();
        const callback = args[0];
        if (typeof callback !== 'function') return Promise.reject(refused);
        queueMicrotask(() => (callback as (error: Error) => void)(refused));
        return undefined;
      },
    ),
  ];
}

function firstOf(sources: Set<JoinableTransaction>): QueryRunner | undefined {
  for (const joinable of sources) {
    const runner = joinable();
    if (runner) return runner;
  }
  return undefined;
}

function install(dataSource: DataSource, current: JoinableTransaction): () => void {
  const manager: EntityManager = dataSource.manager;
  if (manager.queryRunner) throw new Error('The default EntityManager of this DataSource has a QueryRunner: TypeORM changed how it builds it.');
  let buildingRepository = false;
  const unbound = (build: Method): Method =>
    function (this: EntityManager, ...args) {
      buildingRepository = true;
      try {
        return build.apply(this, args);
      } finally {
        buildingRepository = false;
      }
    };
  const undo = [
    override(manager, 'queryRunner', { get: () => (buildingRepository ? undefined : current()) }),
    // The caller's runner's own manager: on a request's runner, each of these is a unit of its own (see RequestTransaction).
    ...ATOMIC_METHODS.map((name) =>
      wrapMethod(manager, name, (method) =>
        function (this: EntityManager, ...args: unknown[]) {
          const runner = current();
          return runner ? (runner.manager[name] as Method)(...args) : method.apply(this, args);
        },
      ),
    ),
    wrapMethod(manager, 'getRepository', unbound),
    wrapMethod(manager, 'getTreeRepository', unbound),
    // A runner the handler creates is the request's: its transaction a savepoint of the request's (see joined-query-runner.ts).
    // The driver's, which the DataSource's createQueryRunner() and TypeORM's own code call.
    wrapMethod(dataSource.driver, 'createQueryRunner', (create) =>
      function (this: unknown, ...args: unknown[]) {
        const runner: QueryRunner = create.apply(this, args);
        if (ownWork) return runner;
        const request = openRequest(current());
        return request ? request.adopt(runner) : LockWaitWatch.watch(runner);
      },
    ),
    ...joinPool(dataSource, current),
    wrapMethod(dataSource, 'query', (query) =>
      function (this: DataSource, sql: string, parameters?: unknown[], queryRunner?: QueryRunner) {
        const runner = queryRunner ?? current();
        // The request's runner answers a statement after the request's end itself (see RequestTransaction.late), released or not.
        if (runner && !queryRunner && RequestTransaction.of(runner)) return runner.query(sql, parameters);
        return query.call(this, sql, parameters, runner);
      },
    ),
    wrapMethod(dataSource, 'createQueryBuilder', (createQueryBuilder) =>
      // With an alias the QueryRunner is the third argument; without one, the only argument.
      function (this: DataSource, entityOrRunner?: unknown, alias?: string, queryRunner?: QueryRunner) {
        return alias
          ? createQueryBuilder.call(this, entityOrRunner, alias, queryRunner ?? current())
          : createQueryBuilder.call(this, entityOrRunner ?? current());
      },
    ),
  ];
  return () => undo.reverse().forEach((restore) => restore());
}
