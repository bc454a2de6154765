import { Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { AsyncLocalStorage } from 'node:async_hooks';
import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import { IdempotencyDataSource } from './idempotency-data-source.js';
import { joinTransactions } from './transaction-join.js';

/**
 * A write made in the async context of a transaction that has already ended,
 * such as work an idempotent handler started without awaiting it. It would
 * commit on its own, apart from the recorded outcome, so it is refused.
 */
export class TransactionClosedError extends Error {
  constructor() {
    super(
      'This database call runs in the context of an idempotent request whose transaction has already ended ' +
        '(work the handler did not await?). Await it inside the handler, or run it in TransactionHost.outside() to commit it on its own.',
    );
    this.name = 'TransactionClosedError';
  }
}

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
 * serves.
 *
 * @example
 * constructor(private readonly tx: TransactionHost) {}
 * create(dto: CreateOrderDto) { return this.tx.manager.save(Order, dto); }
 */
@Injectable()
export class TransactionHost implements OnModuleInit, OnApplicationShutdown {
  private readonly storage = new AsyncLocalStorage<EntityManager>();
  private unjoin?: () => void;

  constructor(private readonly served: IdempotencyDataSource) {}

  get manager(): EntityManager {
    return this.storage.getStore() ?? this.served.dataSource.manager;
  }

  /** Whether the caller runs inside an idempotent request's transaction. */
  get isTransactional(): boolean {
    return this.storage.getStore() !== undefined;
  }

  /** Runs `work` with `manager` as the current transaction. */
  run<T>(manager: EntityManager, work: () => T): T {
    return this.storage.run(manager, work);
  }

  /**
   * Runs `work`, and everything it starts, outside the current transaction:
   * its writes commit on their own, whatever path they take, even if the
   * request rolls back (an audit entry of the attempt, say). The module's
   * own statements on the pool run so.
   */
  outside<T>(work: () => T): T {
    return this.storage.exit(work);
  }

  /** Makes the served DataSource's repositories and managers join the current transaction (see transaction-join.ts). */
  onModuleInit(): void {
    const dataSource = this.served.dataSource;
    this.unjoin = joinTransactions(dataSource, () => this.joinable(dataSource));
  }

  /** After the HTTP server has closed, so no request in flight loses its join. */
  onApplicationShutdown(): void {
    this.unjoin?.();
    this.unjoin = undefined;
  }

  /** The open transaction of the caller on `dataSource`; none outside one, so that everything runs as without the module. */
  private joinable(dataSource: DataSource): QueryRunner | undefined {
    const manager = this.storage.getStore();
    // The default manager's own queryRunner is the joined one: reading it here would recurse.
    if (!manager || manager === dataSource.manager || manager.dataSource !== dataSource) return undefined;
    const runner = manager.queryRunner;
    if (!runner) return undefined;
    if (runner.isReleased || !runner.isTransactionActive) throw new TransactionClosedError();
    return runner;
  }
}
