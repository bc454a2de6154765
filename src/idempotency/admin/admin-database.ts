import type { DataSource } from 'typeorm';
import type { ModuleTables } from '../records/module-tables.js';
import type { Statement } from '../records/record.statements.js';

/** Runs one statement and answers its rows. */
export type AdminQuery = <Row>(statement: Statement) => Promise<Row[]>;

/** Where the admin's statements run: reads on the pool, each action in a transaction of its own, on the app's tables. */
export interface AdminDatabase {
  /** The tables, named in their schema, as the module's own statements name them. */
  tables(): ModuleTables;
  read: AdminQuery;
  /** Runs `work` in a transaction on a connection of its own: committed when it resolves, rolled back when it throws. */
  transaction<T>(work: (query: AdminQuery) => Promise<T>): Promise<T>;
}

/**
 * The admin's database on a TypeORM DataSource and its tables (both looked up when first used).
 * Each action takes a QueryRunner of its own, so it never joins a request's
 * transaction; `outside` keeps reads apart from one too, where the app runs
 * the admin from inside a request.
 */
export function adminDatabaseOf(dataSource: () => DataSource, tables: () => ModuleTables, outside: <T>(work: () => T) => T = (work) => work()): AdminDatabase {
  return {
    tables,
    read: ({ text, values }) => outside(() => dataSource().query(text, values)),
    async transaction(work) {
      const runner = dataSource().createQueryRunner();
      await runner.connect();
      try {
        await runner.startTransaction();
        try {
          const result = await work(({ text, values }) => runner.query(text, values));
          await runner.commitTransaction();
          return result;
        } catch (error) {
          if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
          throw error;
        }
      } finally {
        await runner.release();
      }
    },
  };
}
