import type { DataSource } from 'typeorm';
import { isStatementCancelled } from '../driver/database-errors.js';
import type { ModuleTables } from '../records/module-tables.js';
import type { Statement } from '../records/record.statements.js';
import { ConnectionBudget } from './admin-connections.js';
import { AdminProblemType, AdminRefusedException } from './admin.exceptions.js';
import { ownQueryRunner } from '../transactions/transaction-join.js';

/** Runs one statement and answers its rows. */
export type AdminQuery = <Row>(statement: Statement) => Promise<Row[]>;

/** Where the admin's statements run: each read and each action in a transaction of its own, on the app's tables. */
export interface AdminDatabase {
  /** The tables, named in their schema, as the module's own statements name them. */
  tables(): ModuleTables;
  read: AdminQuery;
  /** Runs `work` in a transaction on a connection of its own: committed when it resolves, rolled back when it throws. */
  transaction<T>(work: (query: AdminQuery) => Promise<T>): Promise<T>;
}

/** What bounds the admin's statements on the app's pool. */
export interface AdminBounds {
  /** How long one statement may run, in milliseconds, and so how long one waits for a connection of the budget. */
  statementTimeout: number;
  /** How many of the pool's connections the admin holds at most at once. */
  connections: number;
}

/**
 * The admin's database on a TypeORM DataSource and its tables (both looked up when first used).
 * Each read and each action takes a QueryRunner of its own, so it never
 * joins a request's transaction. With `bounds` (the admin module's), every
 * statement runs under `SET LOCAL statement_timeout`, which ends with its
 * transaction and so leaves nothing on the app's pooled connection (nor on a
 * pooler's), and the admin holds at most `bounds.connections` of them.
 */
export function adminDatabaseOf(dataSource: () => DataSource, tables: () => ModuleTables, bounds?: AdminBounds): AdminDatabase {
  const budget = bounds && new ConnectionBudget(bounds.connections, bounds.statementTimeout);
  const transaction = <T>(work: (query: AdminQuery) => Promise<T>): Promise<T> => {
    const run = () => inTransaction(dataSource(), bounds?.statementTimeout, work);
    return budget ? budget.run(run) : run();
  };
  return { tables, read: (statement) => transaction((query) => query(statement)), transaction };
}

async function inTransaction<T>(dataSource: DataSource, statementTimeout: number | undefined, work: (query: AdminQuery) => Promise<T>): Promise<T> {
  const runner = ownQueryRunner(dataSource);
  await runner.connect();
  try {
    await runner.startTransaction();
    try {
      if (statementTimeout !== undefined) await runner.query(`SELECT set_config('statement_timeout', $1, true)`, [`${statementTimeout}ms`]);
      const result = await work(({ text, values }) => runner.query(text, values));
      await runner.commitTransaction();
      return result;
    } catch (error) {
      if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
      if (statementTimeout !== undefined && isStatementCancelled(error)) {
        throw new AdminRefusedException(
          AdminProblemType.Timeout,
          `The admin's statement ran past its statementTimeout of ${statementTimeout} ms and was cancelled; nothing was changed. Narrow the search (a scope, an operation, a time range), or raise statementTimeout.`,
        );
      }
      throw error;
    }
  } finally {
    await runner.release();
  }
}
