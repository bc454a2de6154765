import { Logger } from '@nestjs/common';
import type { QueryRunner } from 'typeorm';
import { type PgClient, PgClientDriver } from './driver/pg-client.driver.js';
import type { StatementResult, TransactionDriver, TransactionStatement } from './driver/transaction-driver.js';
import { TypeOrmDriver } from './driver/typeorm.driver.js';
import type { ClaimDriverName } from './idempotency.options.js';
import type { PreparedStatement } from './records/record.statements.js';

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
  private open = false;

  private constructor(private readonly driver: TransactionDriver) {}

  /** Begins a READ COMMITTED transaction and runs `statements` in it, sent together where the connection allows; `first` is the first one's result. */
  static async begin<Row>(
    runner: QueryRunner,
    options: ClaimTransactionOptions,
    ...statements: TransactionStatement[]
  ): Promise<{ transaction: ClaimTransaction; first: StatementResult<Row> | undefined }> {
    const transaction = new ClaimTransaction(await driverFor(runner, options));
    transaction.open = true;
    const settled = await transaction.driver.begin<Row>(statements).catch(async (error: unknown) => {
      await transaction.rollback();
      throw error;
    });
    const failure = settled.find((result): result is PromiseRejectedResult => result.status === 'rejected');
    if (failure) {
      await transaction.rollback();
      throw failure.reason;
    }
    return { transaction, first: (settled[0] as PromiseFulfilledResult<StatementResult<Row>> | undefined)?.value };
  }

  query<Row>(statement: TransactionStatement): Promise<StatementResult<Row>> {
    return this.driver.query<Row>(statement);
  }

  /** Runs `statement` and COMMIT together and answers its rows; throws, with nothing committed, when the statement fails. */
  async commitWith<Row>(statement: PreparedStatement): Promise<StatementResult<Row>> {
    this.open = false;
    return this.driver.commit<Row>(statement);
  }

  /** Rolls back if still open; a broken connection is left for the pool to discard. */
  async rollback(): Promise<void> {
    if (!this.open) return;
    this.open = false;
    await this.driver.rollback();
  }
}

/** The pg driver where asked for and the connection has what it relies on; TypeORM's public API otherwise. */
async function driverFor(runner: QueryRunner, options: ClaimTransactionOptions): Promise<TransactionDriver> {
  if (options.claimDriver === 'typeorm') return new TypeOrmDriver(runner);
  const client: unknown = await runner.connect();
  const unfit = PgClientDriver.unfitFor(runner, client);
  if (!unfit) return new PgClientDriver(runner, client as PgClient, options);
  if (!warnedFallback) {
    warnedFallback = true;
    new Logger('Idempotency').warn(`The claim's transaction goes through TypeORM's QueryRunner API (claimDriver: 'typeorm'): ${unfit}.`);
  }
  return new TypeOrmDriver(runner);
}
