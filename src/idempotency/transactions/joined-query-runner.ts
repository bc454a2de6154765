import { type QueryRunner, QueryRunnerAlreadyReleasedError } from 'typeorm';
import type { Readable } from 'node:stream';
import { StatementRefusedError } from '../errors/idempotency.exceptions.js';
import { effectOf } from './transaction-control.js';
import { wrapMethod } from './wrap-method.js';
import type { StatementOwner } from './user-transactions.js';

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

type Broadcast = (event: string, ...args: unknown[]) => Promise<void>;

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
 *   statements that would end the request's transaction (`guarded`), and
 *   `release()` gives nothing back to the pool;
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
  const broadcaster = runner.broadcaster as unknown as { broadcast: Broadcast };
  let connection: Promise<unknown> | undefined;
  const undo = [
    wrapMethod(runner, 'connect', () => () => (connection ??= host.runner.connect().then(guarded))),
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
    const flags = runner as unknown as { isTransactionActive: boolean; transactionDepth: number };
    flags.isTransactionActive = false;
    flags.transactionDepth = 0;
  };
}

/** A statement as node-postgres takes it: its text, or an object that carries it (a query config, a cursor, a COPY stream). */
type PgQuery = string | { text?: unknown };

/**
 * The request's pg client as `connect()` answers it to the handler's code:
 * the same client, whose `query()` refuses, before anything is sent, a
 * statement that would end or escape the request's transaction (a COMMIT
 * sent there would commit the request's claim with the handler's writes so
 * far, whatever came after). Everything else goes to the client as it is,
 * into the request's transaction.
 */
function guarded(client: unknown): unknown {
  const target = client as { query(...args: unknown[]): unknown };
  return new Proxy(target, {
    get(object, key) {
      const value = Reflect.get(object, key, object) as unknown;
      if (key !== 'query') return typeof value === 'function' ? value.bind(object) : value;
      return (statement: PgQuery, ...rest: unknown[]) => {
        const text = typeof statement === 'string' ? statement : statement?.text;
        const effect = effectOf(text);
        if (!effect || effect.kind === 'session') return object.query(statement, ...rest);
        const refused = new StatementRefusedError(
          effect.kind === 'refused'
            ? effect.reason
            : `${String(text).trim().slice(0, 40)} sent on the connection a QueryRunner's connect() answered inside an @Idempotent() request: that connection is the request's, ` +
                `and the statement would end or start the request's transaction. Send it through queryRunner.query(), or use startTransaction(), commitTransaction() and rollbackTransaction().`,
        );
        const callback = rest[rest.length - 1];
        if (typeof callback !== 'function') return Promise.reject(refused);
        queueMicrotask(() => (callback as (error: Error) => void)(refused));
        return undefined;
      };
    },
  });
}
