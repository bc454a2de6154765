import { Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { type DataSource, type EntityManager, type QueryRunner, QueryRunnerAlreadyReleasedError } from 'typeorm';
import { IdempotencyDataSource } from './idempotency-data-source.js';
import { TransactionClosedError } from '../errors/idempotency.exceptions.js';
import { RequestTransaction } from './request-transaction.js';
import { LockWaitWatch } from './lock-wait-watch.js';
import { ContextSlot } from './request-context.js';
import { joinTransactions } from './transaction-join.js';
import { dataSourceOf } from './typeorm-internals.js';

/**
 * The EntityManager of the transaction an idempotent request runs in.
 *
 * Inside an `@Idempotent()` handler it is the claim's transaction, so the
 * business writes commit or roll back together with the recorded outcome;
 * elsewhere it is the DataSource's own manager. Writes that do not go through
 * it join the same transaction: `@InjectRepository()` repositories, the
 * injected EntityManager, `dataSource.manager`, `dataSource.getRepository()`,
 * `dataSource.query()`, `dataSource.createQueryBuilder()`, and
 * `dataSource.transaction()` (a savepoint), all on the DataSource the module
 * serves. Each of them behaves as a transaction of its own would: see
 * `RequestTransaction`.
 *
 * Everything started inside a request inherits its context, timers too (an
 * `AsyncLocalStorage`, see `ContextSlot`): work that runs while the request's transaction is
 * open joins it. Work that comes after the request committed (a saga, an
 * event handler, a timer) runs on connections of its own, as it would have
 * without the module; after the request rolled back, it fails with
 * `TransactionClosedError` on every path to the database, like a write on
 * a closed EntityManager, so that a failed request keeps nothing.
 *
 * @example
 * constructor(private readonly tx: IdempotencyTransactionHost) {}
 * create(dto: CreateOrderDto) { return this.tx.manager.save(Order, dto); }
 */
@Injectable()
export class IdempotencyTransactionHost implements OnModuleInit, OnApplicationShutdown {
  private readonly current = new ContextSlot<EntityManager>('current transaction');
  private unjoin?: () => void;

  constructor(private readonly served: IdempotencyDataSource) {}

  /**
   * The current transaction's manager; the DataSource's own once the
   * request's transaction committed. Throws `TransactionClosedError` when
   * called from work that outlived a transaction that rolled back, and
   * TypeORM's `QueryRunnerAlreadyReleasedError` (answered 503) once the
   * transaction's connection was lost.
   */
  get manager(): EntityManager {
    const manager = this.current.get();
    if (!manager) return this.served.dataSource.manager;
    const runner = manager.queryRunner;
    const request = runner && RequestTransaction.of(runner);
    if (request) {
      const state = request.state;
      if (state === 'committed') return this.served.dataSource.manager;
      if (state === 'rolled-back') throw new TransactionClosedError();
      if (state === 'connection-lost') throw new QueryRunnerAlreadyReleasedError();
      // Open, or settling: its operations wait for the end (see RequestTransaction.late).
      return manager;
    }
    if (runner && !isOpen(runner)) throw connectionLost(runner) ? new QueryRunnerAlreadyReleasedError() : new TransactionClosedError();
    return manager;
  }

  /** Whether the caller runs inside an idempotent request's transaction (or runs work that outlived it). */
  get isTransactional(): boolean {
    return this.current.get() !== undefined;
  }

  /** Runs `work` with `manager` as the current transaction. */
  run<T>(manager: EntityManager, work: () => T): T {
    return this.current.run(manager, work);
  }

  /**
   * Runs `work`, and everything it starts, outside the current transaction:
   * its writes commit on their own, whatever path they take, even if the
   * request rolls back (an audit entry of the attempt, say); a QueryRunner
   * it creates has a connection of its own. Start timers and background
   * loops with it when their writes must commit whether or not the request
   * that first started them does.
   *
   * Awaited in a handler, a write in `work` takes a second pool connection
   * while the request holds one: once every connection is held by a request
   * waiting for its second, they wait for each other for good. Leave the
   * pool headroom, or give such writes a pool of their own. A statement of
   * `work` that waits for a lock the request holds would wait for good too:
   * after a second it is cancelled, with `LockHeldByRequestError`.
   *
   * @example
   * // A buffered writer whose flush timer may start during an idempotent request:
   * this.timer ??= this.tx.outside(() => setInterval(() => this.flush(), 1000));
   */
  outside<T>(work: () => T): T {
    const runner = this.current.get()?.queryRunner;
    const request = runner && RequestTransaction.of(runner);
    // Its QueryRunners are watched for waiting on the request's own locks (see LockWaitWatch).
    return request?.isOpen ? LockWaitWatch.escaped(request, () => this.current.run(undefined, work)) : this.current.run(undefined, work);
  }

  /** Makes the served DataSource's repositories and managers join the current transaction (see transaction-join.ts). */
  onModuleInit(): void {
    const dataSource = this.served.dataSource;
    // Read outside any request: typeorm-transactional's `manager` getter answers its current transaction's manager inside one.
    const defaultManager = dataSource.manager;
    this.unjoin = joinTransactions(dataSource, () => this.joinable(dataSource, defaultManager));
  }

  /** After the HTTP server has closed, so no request in flight loses its join. */
  onApplicationShutdown(): void {
    this.unjoin?.();
    this.unjoin = undefined;
  }

  /**
   * The transaction of the caller on `dataSource`; none outside one, so that
   * everything runs as without the module. A request's stays the caller's
   * until it committed, and for good once it rolled back or lost its
   * connection: every path to the database then fails on its runner
   * (`TransactionClosedError`), rather than commit on its own what a failed
   * request started. A transaction of the app's own, run with `run()`, is
   * the caller's only while it is open.
   */
  private joinable(dataSource: DataSource, defaultManager: EntityManager): QueryRunner | undefined {
    const manager = this.current.get();
    // The default manager's own queryRunner is the joined one: reading it here would recurse.
    if (!manager || manager === defaultManager || dataSourceOf(manager) !== dataSource) return undefined;
    const runner = manager.queryRunner;
    if (!runner) return undefined;
    const request = RequestTransaction.of(runner);
    if (request) return request.state === 'committed' ? undefined : runner;
    return isOpen(runner) || connectionLost(runner) ? runner : undefined;
  }
}

/** Whether a transaction of the app's own runs on `runner`: until TypeORM ends it. */
function isOpen(runner: QueryRunner): boolean {
  return !runner.isReleased && runner.isTransactionActive;
}

/** The connection failed inside the app's transaction: TypeORM released the runner before COMMIT or ROLLBACK. */
function connectionLost(runner: QueryRunner): boolean {
  return runner.isReleased && runner.isTransactionActive;
}
