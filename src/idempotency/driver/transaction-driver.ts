import type { PreparedStatement } from '../records/record.statements.js';
import type { IsolationLevel } from '../options/idempotency.options.js';

/** What a statement answers: its rows. */
export interface StatementResult<Row> {
  rows: Row[];
}

/** A statement of the claim's transaction: one of the records' statements, or plain SQL without parameters (SAVEPOINT). */
export type TransactionStatement = PreparedStatement | string;

/**
 * How the claim's transaction reaches the database, on the connection of one
 * TypeORM QueryRunner. While the transaction is open, the runner knows it is
 * in one, so that business writes through `runner.manager` join it (and a
 * nested `manager.transaction()` becomes a savepoint).
 *
 * Two implementations: `PgClientDriver`, on the runner's node-postgres client
 * (named prepared statements, pipelining), which reaches into pg's and
 * TypeORM's internals (`pg-client.contract.spec.ts` pins them down); and
 * `TypeOrmDriver`, through the QueryRunner's public API only.
 */
export interface TransactionDriver {
  /**
   * Opens a transaction at `isolation` and runs `statements` in it, sent
   * together where the connection allows. Every statement runs and settles,
   * as PostgreSQL runs a pipeline: after a failure, the rest fail too.
   */
  begin<Row>(isolation: IsolationLevel, statements: TransactionStatement[]): Promise<Array<PromiseSettledResult<StatementResult<Row>>>>;
  /** Runs one statement in the open transaction. */
  query<Row>(statement: TransactionStatement): Promise<StatementResult<Row>>;
  /** Runs statements in the open transaction, sent together where the connection allows; each settles, as in `begin`. */
  queryTogether<Row>(statements: TransactionStatement[]): Promise<Array<PromiseSettledResult<StatementResult<Row>>>>;
  /**
   * Runs `last`, then COMMIT, sent together where the connection allows;
   * answers `last`'s result. Throws, with nothing committed, when either
   * fails.
   */
  commit<Row>(last: PreparedStatement): Promise<StatementResult<Row>>;
  /** Rolls back; a broken connection is left for the pool to discard. */
  rollback(): Promise<void>;
  /** Whether statements sent one after another go out without waiting for each other's answers. */
  readonly pipelined: boolean;
  /** Whether TypeORM sees BEGIN, COMMIT and ROLLBACK, and so fires its transaction events for them itself. */
  readonly firesTypeOrmEvents: boolean;
  /** Whether the server ended the connection's session for idling in the transaction; undefined where the driver cannot tell. */
  readonly endedByIdleTimeout: boolean | undefined;
  /**
   * Sends SQL without parameters (several statements, where not pipelined)
   * on the connection now, ahead of anything sent after it, bypassing the
   * wrappers the request's transaction puts on the QueryRunner.
   */
  enqueue(sql: string): Promise<unknown>;
  /** The app's code dropped prepared statements of the connection (DEALLOCATE, all or those named): the module's among them are prepared anew on their next use. */
  forgetPreparedStatements(names: 'all' | readonly string[]): void;
}

/** Runs `statements` one after another, each settling whatever the one before did. */
export async function settleInTurn<Row>(
  statements: TransactionStatement[],
  run: (statement: TransactionStatement) => Promise<StatementResult<Row>>,
): Promise<Array<PromiseSettledResult<StatementResult<Row>>>> {
  const settled: Array<PromiseSettledResult<StatementResult<Row>>> = [];
  for (const statement of statements) {
    settled.push(await run(statement).then((value) => ({ status: 'fulfilled', value }) as const, (reason: unknown) => ({ status: 'rejected', reason }) as const));
  }
  return settled;
}

/** Throws the first failure among settled statements. */
export function throwFirstFailure<Row>(settled: Array<PromiseSettledResult<StatementResult<Row>>>): void {
  const failure = settled.find((result): result is PromiseRejectedResult => result.status === 'rejected');
  if (failure) throw failure.reason;
}
