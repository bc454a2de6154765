import type { DataSource } from 'typeorm';
import type { PreparedStatement } from '../records/record.statements.js';
import { isNamedStatementLost, unnamedAfter } from './named-statements.js';
import type { StatementResult } from './transaction-driver.js';

/** The node-postgres Pool under TypeORM's postgres driver (`driver.master`), as far as the reader uses it. */
interface PgPool {
  query<Row>(statement: { name?: string; text: string; values: unknown[] }): Promise<StatementResult<Row>>;
}

/** Runs one of the module's reads on a pooled connection of its own, outside any transaction, and answers its rows. */
export type PoolRead = <Row>(statement: PreparedStatement) => Promise<Row[]>;

/**
 * The module's reads from the pool. On TypeORM's postgres driver they go
 * straight to the node-postgres Pool under it, as named prepared statements:
 * no query runner is built, and each connection parses and plans a
 * statement once (with `preparedStatements: false`, unnamed, as under a
 * pooler). On a DataSource without that pool, through `dataSource.query()`.
 */
export function poolReadOf(dataSource: DataSource, options: { preparedStatements: boolean }): PoolRead {
  const pool = (dataSource.driver as unknown as { master?: Partial<PgPool> }).master;
  if (typeof pool?.query !== 'function') return ({ text, values }) => dataSource.query(text, values);
  const pg = pool as PgPool;
  const read = async <Row>({ name, text, values }: PreparedStatement) => (await pg.query<Row>(options.preparedStatements ? { name, text, values } : { text, values })).rows;
  return async <Row>(statement: PreparedStatement) => {
    try {
      return await read<Row>(statement);
    } catch (error) {
      if (!isNamedStatementLost(error)) throw error;
      // The pool discards the connection a query failed on: a statement the app's code dropped there (DEALLOCATE) is prepared again on another.
      try {
        return await read<Row>(statement);
      } catch (again) {
        unnamedAfter(again, options);
        throw again;
      }
    }
  };
}
