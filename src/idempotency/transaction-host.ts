import { Injectable } from '@nestjs/common';
import { AsyncLocalStorage } from 'node:async_hooks';
import type { EntityManager } from 'typeorm';
import { IdempotencyDataSource } from './idempotency-data-source.js';

/**
 * The EntityManager of the transaction an idempotent request runs in.
 *
 * Services write through `host.manager` and never pass a manager around:
 * inside an `@Idempotent()` handler it is the claim's transaction, so the
 * business writes commit or roll back together with the recorded outcome;
 * elsewhere it is the own manager of the DataSource the module serves.
 *
 * @example
 * constructor(private readonly tx: TransactionHost) {}
 * create(dto: CreateOrderDto) { return this.tx.manager.save(Order, dto); }
 */
@Injectable()
export class TransactionHost {
  private readonly storage = new AsyncLocalStorage<EntityManager>();

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
}
