import type { DataSource } from 'typeorm';
import type { PreparedStatement } from '../records/record.statements.js';
import { asOwnWork } from '../transactions/transaction-join.js';
import { sqlStateOf } from './database-errors.js';
import { afterLostStatement, isNamedStatementLost } from './named-statements.js';
import { pgPoolOf } from './pg-pool.js';
import type { StatementResult } from './transaction-driver.js';

interface PgPoolClient {
  query<Row>(statement: { name?: string; text: string; values: unknown[] } | string): Promise<StatementResult<Row>>;
  processID?: number | null;
  /** With an error, the pool discards the connection rather than hand it out again. */
  release(error?: Error): void;
}

/** Runs one of the module's reads on a pooled connection of its own, outside any transaction, and answers its rows. */
export type PoolRead = <Row>(statement: PreparedStatement) => Promise<Row[]>;

/**
 * The module's reads from the pool. On TypeORM's postgres driver they go
 * straight to the node-postgres Pool under it, as named prepared statements:
 * no query runner is built, and each connection parses and plans a
 * statement once (with `preparedStatements: false`, unnamed, as under a
 * pooler). A named statement found missing is sent again on the same
 * connection, prepared anew or unnamed (see `afterLostStatement`). On a
 * DataSource without that pool, through `dataSource.query()`.
 */
export function poolReadOf(dataSource: DataSource, options: { preparedStatements: boolean }): PoolRead {
  const pool = pgPoolOf<PgPoolClient>(dataSource);
  const connect = pool?.connect?.bind(pool);
  if (!connect) return ({ text, values }) => dataSource.query(text, values);
  return async <Row>({ name, text, values }: PreparedStatement) => {
    const read = async () => (await client.query<Row>(options.preparedStatements ? { name, text, values } : { text, values })).rows;
    // A connection of its own, outside the request's transaction the caller may run in.
    const client = await asOwnWork(connect);
    let failure: Error | undefined;
    try {
      return await read().catch(async (error: unknown) => {
        if (sqlStateOf(error) === INSUFFICIENT_PRIVILEGE) return asConnectionRole(client, read);
        if (!isNamedStatementLost(error)) throw error;
        await afterLostStatement(client, error, options);
        return read();
      });
    } catch (error) {
      failure = error as Error;
      throw error;
    } finally {
      client.release(failure);
    }
  };
}

const INSUFFICIENT_PRIVILEGE = '42501';

/**
 * A read refused for the role the app's code left on the connection (a
 * `SET ROLE` outside any request), once more as the connection's own role,
 * for one transaction: the app's role stays the connection's.
 */
async function asConnectionRole<T>(client: PgPoolClient, read: () => Promise<T>): Promise<T> {
  await client.query('BEGIN');
  try {
    await client.query("SELECT set_config('role', 'none', true)");
    return await read();
  } finally {
    await client.query('COMMIT');
  }
}
