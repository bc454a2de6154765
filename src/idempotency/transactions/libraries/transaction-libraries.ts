import { Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { ModulesContainer } from '@nestjs/core';
import type { DataSource, EntityManager } from 'typeorm';
import { IdempotencyDataSource } from '../idempotency-data-source.js';
import type { RequestTransaction } from '../request-transaction.js';
import { IdempotencyTransactionHost } from '../transaction-host.js';
import type { LibraryJoin, Outside } from './library-join.js';

/** Set on a DataSource by typeorm-transactional's `addTransactionalDataSource()`: the name the library knows it by. */
export const TRANSACTIONAL_DATA_SOURCE = '@transactional/data-source';

/**
 * The transaction libraries the app already runs on the served DataSource,
 * typeorm-transactional and @nestjs-cls/transactional, joined so that the
 * code written for them keeps what they promise inside an idempotent
 * request: their REQUIRED joins the request's transaction, REQUIRES_NEW is
 * a transaction of its own on another connection, and typeorm-transactional's
 * commit and rollback hooks fire at the request's real COMMIT or ROLLBACK.
 *
 * Both are optional: each join's code loads, at startup, only where the app
 * uses its library, and an app with neither runs its handlers as they are.
 * @nestjs-cls/transactional's loads where the plugin does;
 * typeorm-transactional's where `addTransactionalDataSource()` marked the
 * served DataSource, and then refuses one whose library it cannot load.
 */
@Injectable()
export class TransactionLibraries implements OnModuleInit, OnApplicationShutdown {
  private joins: LibraryJoin[] = [];

  constructor(
    private readonly served: IdempotencyDataSource,
    private readonly host: IdempotencyTransactionHost,
    private readonly modules: ModulesContainer,
  ) {}

  async onModuleInit(): Promise<void> {
    const dataSource = this.served.dataSource;
    const outside = <T>(work: () => T): T => this.host.outside(work);
    const joins = await Promise.all([this.joinTypeormTransactional(dataSource, outside), this.joinNestjsCls(dataSource, outside)]);
    this.joins = joins.filter((join) => join !== undefined);
    for (const { isolation } of this.joins) if (isolation) this.served.requireIsolation(isolation);
  }

  /** typeorm-transactional's join, whose code loads only where the app added `dataSource` to the library. */
  private async joinTypeormTransactional(dataSource: DataSource, outside: Outside): Promise<LibraryJoin | undefined> {
    const name: unknown = Reflect.get(dataSource, TRANSACTIONAL_DATA_SOURCE);
    if (typeof name !== 'string') return undefined;
    const { joinTypeormTransactional } = await import('./typeorm-transactional.js');
    return joinTypeormTransactional(dataSource, name, outside);
  }

  /** @nestjs-cls/transactional's join, whose code loads only where the app has the plugin. */
  private async joinNestjsCls(dataSource: DataSource, outside: Outside): Promise<LibraryJoin | undefined> {
    const plugin = await import('@nestjs-cls/transactional').catch(() => undefined);
    if (!plugin) return undefined;
    const { joinNestjsCls } = await import('./nestjs-cls.js');
    return joinNestjsCls(this.modules, dataSource, outside);
  }

  /** Runs the handler's `work` inside the context of each library that has one for the request's `transaction`. */
  around<T>(transaction: RequestTransaction, manager: EntityManager, work: () => Promise<T>): Promise<T> {
    let run = work;
    for (const join of this.joins) {
      const inner = run;
      if (join.around) run = () => join.around!(transaction, manager, inner);
    }
    return run();
  }

  /** After the HTTP server has closed, with IdempotencyTransactionHost's own join. */
  onApplicationShutdown(): void {
    for (const join of this.joins.splice(0)) join.undo();
  }
}
