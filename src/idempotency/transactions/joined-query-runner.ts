import { type QueryRunner, QueryRunnerAlreadyReleasedError } from 'typeorm';
import type { Readable } from 'node:stream';
import { wrapMethod } from './wrap-method.js';
import type { StatementOwner } from './user-transactions.js';
import { broadcasterOf, type RunnerClient, runnerState } from './typeorm-internals.js';

/** What a QueryRunner the handler created asks of the request's transaction it joins: `RequestTransaction`. */
export interface JoinedRunnerHost {
  /** Runs a statement of `owner`'s in the request's transaction; its BEGIN, COMMIT and ROLLBACK become savepoint commands. */
  query(owner: StatementOwner, args: unknown[]): Promise<unknown>;
  /** A stream of rows `owner` reads, served so that its other statements can run between them. */
  stream(owner: StatementOwner, sql: string, parameters: unknown[] | undefined, onEnd?: () => void, onError?: (error: Error) => void): Promise<Readable>;
  /** `owner` gave its connection back: a transaction it left open rolls back, as a real one would never commit. */
  released(owner: StatementOwner): Promise<void>;
  /** Refuses a transaction asked for at a level above the request's, as a nested `transaction(level)` is. */
  checkNested(level: unknown, what: string): void;
  /** The request's own QueryRunner, whose connection this one shares. */
  readonly runner: QueryRunner;
}

/** TypeORM's events for the end of a transaction; here they are a savepoint's, and the request fires them at its real COMMIT. */
const COMMIT_EVENTS = new Set(['BeforeTransactionCommit', 'AfterTransactionCommit']);


/**
 * Binds a QueryRunner the handler created inside an idempotent request
 * (`dataSource.createQueryRunner()`, the transaction NestJS's documentation
 * teaches) to the request's transaction: without this it would take a
 * connection of its own, and its COMMIT would keep its rows when the request
 * then failed, so that the retry ran again.
 *
 * The runner stays TypeORM's own object: its manager, repositories, query
 * builders and transaction flags work as they do on any runner. Only the
 * way to the database changes:
 *
 * - `connect()` answers the request's connection, which refuses the
 *   statements that would end the request's transaction (`guardedClient`),
 *   and `release()` gives nothing back to the pool;
 * - every statement, TypeORM's `START TRANSACTION`, `COMMIT` and `ROLLBACK`
 *   included, goes to the request's transaction, where the runner's
 *   transaction is a savepoint (`UserTransactions`), and the rest runs as
 *   any statement of the handler's does;
 * - `startTransaction(level)` above the request's level is refused, with
 *   the route option that gives it;
 * - commit events wait for the request's COMMIT, where TypeORM would fire
 *   them at what is here a savepoint's release.
 *
 * @returns how to make it a runner of its own again, on a pool connection,
 * once the request has committed: work that outlives a committed request
 * runs on its own, as without the module.
 */
export function joinQueryRunner(runner: QueryRunner, host: JoinedRunnerHost): () => void {
  const owner: StatementOwner = runner;
  const broadcaster = broadcasterOf(runner);
  const state = runnerState(runner);
  let connection: Promise<unknown> | undefined;
  const undo = [
    // The request's runner answers its client guarded (see guardedClient): set here too, for code that reads it after connect().
    wrapMethod(runner, 'connect', () => () =>
      (connection ??= host.runner.connect().then((client: RunnerClient) => {
        state.databaseConnection = client;
        return client;
      })),
    ),
    wrapMethod(runner, 'release', () => async () => {
      if (runner.isReleased) return;
      (runner as { isReleased: boolean }).isReleased = true;
      await host.released(owner);
    }),
    wrapMethod(runner, 'query', () => (...args: unknown[]) => (runner.isReleased ? Promise.reject(new QueryRunnerAlreadyReleasedError()) : host.query(owner, args))),
    wrapMethod(runner, 'stream', () => (sql: string, parameters?: unknown[], onEnd?: () => void, onError?: (error: Error) => void) =>
      runner.isReleased ? Promise.reject(new QueryRunnerAlreadyReleasedError()) : host.stream(owner, sql, parameters, onEnd, onError),
    ),
    wrapMethod(runner, 'startTransaction', (start) =>
      function (this: QueryRunner, level?: unknown) {
        // Only the outermost: TypeORM's nested ones are savepoints of its own inside it.
        if (!this.isTransactionActive) host.checkNested(level, `queryRunner.startTransaction('${String(level)}')`);
        return start.call(this, level);
      },
    ),
    wrapMethod(broadcaster, 'broadcast', (broadcast) =>
      function (this: unknown, event: string, ...args: unknown[]) {
        return COMMIT_EVENTS.has(event) ? Promise.resolve() : broadcast.call(this, event, ...args);
      },
    ),
  ];
  return () => {
    for (const restore of undo.reverse()) restore();
    state.isTransactionActive = false;
    state.transactionDepth = 0;
    state.databaseConnection = undefined;
  };
}
