import { Logger } from '@nestjs/common';
import type { QueryRunner } from 'typeorm';
import { explainedOwnFailure } from '../driver/database-errors.js';
import { type PgClient, PgClientDriver } from '../driver/pg-client.driver.js';
import { type StatementResult, throwFirstFailure, type TransactionDriver, type TransactionStatement } from '../driver/transaction-driver.js';
import { TypeOrmDriver } from '../driver/typeorm.driver.js';
import { unguarded } from '../transactions/guarded-client.js';
import type { TransactionHooks } from '../transactions/request-transaction.js';
import type { ClaimDriverName, IsolationLevel } from '../options/idempotency.options.js';
import type { PreparedStatement } from '../records/record.statements.js';

/** How the module's statements go to the server. */
interface ClaimTransactionOptions {
  /** Which driver; `pg` falls back to `typeorm` on a connection without the internals it relies on. */
  claimDriver: ClaimDriverName;
  /** Named prepared statements (the pg driver); off, each is sent unnamed and parsed each time. */
  preparedStatements: boolean;
}

/** Warned once per process: every connection of a pool is alike. */
let warnedFallback = false;

/**
 * The claim's transaction, on one connection held to the end: BEGIN with the
 * claim, the handler's writes, the outcome with COMMIT. A `TransactionDriver`
 * carries it to the database: on the runner's pg client by default
 * (pipelined where the connection is), through TypeORM's public API
 * otherwise. Either way, business writes through `runner.manager` join it.
 */
export class ClaimTransaction {
  private isOpen = false;
  /** Set by the request's transaction once the handler joins it. */
  private hooks?: TransactionHooks;

  private constructor(private readonly driver: TransactionDriver) {}

  /** Begins a transaction at `isolation` and runs `statements` in it, sent together where the connection allows, and answers their results. */
  static async begin(
    runner: QueryRunner,
    options: ClaimTransactionOptions,
    isolation: IsolationLevel,
    ...statements: TransactionStatement[]
  ): Promise<{ transaction: ClaimTransaction; results: StatementResult<unknown>[] }> {
    return ClaimTransaction.start(runner, options, async (driver) => valuesOf(await driver.begin<unknown>(isolation, statements))).then(([transaction, results]) => ({ transaction, results }));
  }

  /** A transaction on the runner's connection, opened by `opening`; rolled back when that throws. */
  private static async start<T>(runner: QueryRunner, options: ClaimTransactionOptions, opening: (driver: TransactionDriver) => Promise<T>): Promise<[ClaimTransaction, T]> {
    const transaction = new ClaimTransaction(await driverFor(runner, options));
    transaction.isOpen = true;
    try {
      return [transaction, await opening(transaction.driver)];
    } catch (error) {
      await transaction.rollback();
      throw explainedOwnFailure(error);
    }
  }

  query<Row>(statement: TransactionStatement): Promise<StatementResult<Row>> {
    return this.driver.query<Row>(statement).catch((error: unknown) => Promise.reject(explainedOwnFailure(error)));
  }

  /** Runs statements sent together where the connection allows; throws the first failure. */
  async queryTogether(...statements: TransactionStatement[]): Promise<StatementResult<unknown>[]> {
    return valuesOf(await this.driver.queryTogether<unknown>(statements));
  }

  /**
   * Runs `statement` and COMMIT together and answers its rows; throws, with
   * nothing committed, when the statement fails: then the hooks hear of a
   * rollback.
   */
  async commitWith<Row>(statement: PreparedStatement): Promise<StatementResult<Row>> {
    if (this.hooks) await this.hooks.beforeCommit();
    this.isOpen = false;
    let committed: StatementResult<Row>;
    try {
      committed = await this.driver.commit<Row>(statement);
    } catch (error) {
      if (this.hooks) await this.hooks.afterRollback(error).catch((failure: unknown) => hookFailed('afterTransactionRollback', failure));
      throw explainedOwnFailure(error);
    }
    if (this.hooks) await this.hooks.afterCommit().catch((error: unknown) => hookFailed('afterTransactionCommit', error));
    return committed;
  }

  /** Fires `hooks` at the real COMMIT and ROLLBACK. */
  hookInto(hooks: TransactionHooks): void {
    this.hooks = hooks;
  }

  get firesTypeOrmEvents(): boolean {
    return this.driver.firesTypeOrmEvents;
  }

  /** Open until COMMIT or ROLLBACK is sent. */
  get open(): boolean {
    return this.isOpen;
  }

  get pipelined(): boolean {
    return this.driver.pipelined;
  }

  /** Whether the server ended the connection's session for idling in this transaction; undefined where the driver cannot tell. */
  get endedByIdleTimeout(): boolean | undefined {
    return this.driver.endedByIdleTimeout;
  }

  enqueue(sql: string): Promise<unknown> {
    return this.driver.enqueue(sql);
  }

  forgetPreparedStatements(names: 'all' | readonly string[]): void {
    this.driver.forgetPreparedStatements(names);
  }

  /**
   * Rolls back if still open; a broken connection is left for the pool to
   * discard. `error`: what it rolls back for, which the hooks are given.
   */
  async rollback(error?: unknown): Promise<void> {
    if (!this.isOpen) return;
    if (this.hooks) await this.hooks.beforeRollback().catch((failure: unknown) => hookFailed('beforeTransactionRollback', failure));
    this.isOpen = false;
    await this.driver.rollback();
    if (this.hooks) await this.hooks.afterRollback(error).catch((failure: unknown) => hookFailed('afterTransactionRollback', failure));
  }
}

/** A hook's failure once the transaction has ended: logged, since what it ended stays ended. */
function hookFailed(hook: string, error: unknown): void {
  new Logger('Idempotency').error(`A transaction hook (${hook}) failed after the request's transaction ended: ${(error as Error)?.stack ?? String(error)}`);
}

/** The results of statements that all succeeded; else throws the first failure. */
function valuesOf<Row>(settled: Array<PromiseSettledResult<StatementResult<Row>>>): StatementResult<Row>[] {
  throwFirstFailure(settled);
  return settled.map((result) => (result as PromiseFulfilledResult<StatementResult<Row>>).value);
}

/** The pg driver where asked for and the connection has what it relies on; TypeORM's public API otherwise. */
async function driverFor(runner: QueryRunner, options: ClaimTransactionOptions): Promise<TransactionDriver> {
  if (options.claimDriver === 'typeorm') return new TypeOrmDriver(runner);
  // Past the guard a request's transaction puts on the client for the app's code (a probe after a failure runs on the same runner).
  const client: unknown = unguarded(await runner.connect());
  const unfit = PgClientDriver.unfitFor(runner, client);
  if (!unfit) return new PgClientDriver(runner, client as PgClient, options);
  if (!warnedFallback) {
    warnedFallback = true;
    new Logger('Idempotency').warn(`The claim's transaction goes through TypeORM's QueryRunner API (claimDriver: 'typeorm'): ${unfit}.`);
  }
  return new TypeOrmDriver(runner);
}
