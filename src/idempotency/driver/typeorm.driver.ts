import type { QueryRunner } from 'typeorm';
import type { PreparedStatement } from '../records/record.statements.js';
import type { IsolationLevel } from '../options/idempotency.options.js';
import { RequestTransaction } from '../transactions/request-transaction.js';
import { settleInTurn, type StatementResult, type TransactionDriver, type TransactionStatement } from './transaction-driver.js';

/**
 * The claim's transaction through TypeORM's public QueryRunner API only:
 * `startTransaction(isolation)`, `query()`, `commitTransaction()`,
 * `rollbackTransaction()`. TypeORM keeps its own transaction flags, and its
 * transaction subscribers and query logging see the module's statements.
 * Statements go one after another, unnamed: BEGIN and its isolation level
 * take a round trip each, the record and COMMIT another each.
 */
export class TypeOrmDriver implements TransactionDriver {
  readonly pipelined = false;
  readonly firesTypeOrmEvents = true;
  /** TypeORM's API does not say why a connection was lost. */
  readonly endedByIdleTimeout = undefined;

  constructor(private readonly runner: QueryRunner) {}

  async begin<Row>(isolation: IsolationLevel, statements: TransactionStatement[]): Promise<Array<PromiseSettledResult<StatementResult<Row>>>> {
    await this.own(() => this.runner.startTransaction(isolation));
    return settleInTurn(statements, (statement) => this.query<Row>(statement));
  }

  async query<Row>(statement: TransactionStatement): Promise<StatementResult<Row>> {
    const { text, values } = typeof statement === 'string' ? { text: statement, values: undefined } : statement;
    // The structured result: without it, TypeORM answers an UPDATE with [rows, count] rather than rows.
    const result = await this.own(() => this.runner.query(text, values, true));
    return { rows: result.records as Row[] };
  }

  queryTogether<Row>(statements: TransactionStatement[]): Promise<Array<PromiseSettledResult<StatementResult<Row>>>> {
    return settleInTurn(statements, (statement) => this.query<Row>(statement));
  }

  async commit<Row>(last: PreparedStatement): Promise<StatementResult<Row>> {
    let result: StatementResult<Row>;
    try {
      result = await this.query<Row>(last);
    } catch (error) {
      await this.rollback();
      throw error;
    }
    await this.own(() => this.runner.commitTransaction());
    return result;
  }

  async rollback(): Promise<void> {
    await this.own(() => this.runner.rollbackTransaction()).catch(() => undefined);
  }

  /** This driver sends its statements unnamed: none to forget. */
  forgetPreparedStatements(): void {}

  enqueue(sql: string): Promise<unknown> {
    return this.own(() => this.runner.query(sql));
  }

  /** The module's own statements pass the request's wrappers of the runner, closed or not. */
  private own<T>(work: () => Promise<T>): Promise<T> {
    return RequestTransaction.ownStatements(this.runner, work);
  }
}
