import { AsyncLocalStorage } from 'node:async_hooks';
import { Logger } from '@nestjs/common';
import { type QueryRunner, QueryRunnerAlreadyReleasedError } from 'typeorm';
import { TransactionClosedError, UnitFailedWithoutSavepointError } from '../errors/idempotency.exceptions.js';
import { sqlStateOf, transactionConflictOf } from '../driver/database-errors.js';
import type { IsolationLevel } from '../options/idempotency.options.js';
import { CommitScopedState, type OwnQuery } from './commit-scoped-state.js';

/** What the request's transaction keeps of the app's own transactions. */
export interface RequestTransactionTerms {
  /** The level it runs at: a nested transaction or SET TRANSACTION asking for more is refused. */
  isolation: IsolationLevel;
  /** The database's INITIALLY DEFERRED constraints, which each unit checks at its end as its COMMIT would (see `CommitScopedState`). */
  deferredConstraints: readonly string[];
  /** Whether each unit runs behind a savepoint of its own (the module's `unitSavepoints`). */
  savepoints: boolean;
}

/**
 * What happens at the transaction's real COMMIT and ROLLBACK besides them:
 * TypeORM's transaction events, which TypeORM does not fire where it never
 * sees those statements, and the hooks of the app's transaction library
 * (`TransactionLibraries`). A hook failing after COMMIT or ROLLBACK does not
 * undo them.
 */
export interface TransactionHooks {
  beforeCommit(): Promise<void>;
  afterCommit(): Promise<void>;
  beforeRollback(): Promise<void>;
  /** `error`: what the transaction rolled back for, where the flow knows it (the handler's failure, a failed COMMIT). */
  afterRollback(error?: unknown): Promise<void>;
}

/** The end of the request's transaction, as a transaction library of the app's waits for it. */
export type TransactionEnd = Pick<TransactionHooks, 'afterCommit' | 'afterRollback'>;

/** How the request's statements of its own reach the connection: see `TransactionDriver.enqueue`. */
export interface SavepointChannel {
  /** Whether statements sent one after another go out without waiting for each other's answers. */
  readonly pipelined: boolean;
  /** Sends SQL without parameters now, in order with what is sent after it. */
  enqueue(sql: string): Promise<unknown>;
  /** Whether the transaction is still open: false from the moment COMMIT or ROLLBACK is sent. */
  readonly open: boolean;
  /** Whether TypeORM sees the real BEGIN, COMMIT and ROLLBACK, and so fires its transaction events for them itself. */
  readonly firesTypeOrmEvents: boolean;
  /** Fires `hooks` at the real COMMIT and ROLLBACK. */
  hookInto(hooks: TransactionHooks): void;
}

/** TypeORM's events for the end of a transaction; a savepoint's RELEASE fires the first two too. */
const COMMIT_EVENTS = new Set(['BeforeTransactionCommit', 'AfterTransactionCommit']);

type Broadcast = (event: string, ...args: unknown[]) => Promise<void>;

/** The EntityManager methods that would run in a transaction of their own outside one: without the module, each is atomic. */
export const ATOMIC_METHODS = ['save', 'remove', 'softRemove', 'recover', 'transaction'] as const;

const SAVEPOINT = 'SAVEPOINT idempotency_unit';
const RELEASE = 'RELEASE SAVEPOINT idempotency_unit';
const ROLLBACK_TO = 'ROLLBACK TO SAVEPOINT idempotency_unit';

/**
 * The subtransactions PostgreSQL keeps in a backend's own cache
 * (PGPROC_MAX_CACHED_SUBXIDS): past them a transaction overflows, and every
 * snapshot taken while it runs (on standbys, until it ends) looks the
 * transaction of each recent row up in pg_subtrans.
 */
const CACHED_SUBTRANSACTIONS = 64;
/** Warned once per process: one route's shape is enough to act on. */
let warnedOverflow = false;

/** The unit of work the caller runs in, if any: everything it starts belongs to it. */
const units = new AsyncLocalStorage<object>();
const byRunner = new WeakMap<QueryRunner, RequestTransaction>();

/**
 * The request's transaction as the handler's code meets it, on the flow's
 * QueryRunner. Without the module each of the handler's writes would commit
 * on its own; joined into one transaction they must still behave so:
 *
 * - **One unit at a time.** A statement, a `save()` (or `remove()`,
 *   `softRemove()`, `recover()`) and a `transaction()` callback are each a
 *   unit that would have had a connection of its own. Units share the one
 *   connection, so they run one after another: `Promise.all` of two
 *   `dataSource.transaction()` calls no longer mixes their savepoints, which
 *   TypeORM numbers by a depth counter on the runner.
 * - **A savepoint per unit.** Each unit runs after `SAVEPOINT
 *   idempotency_unit`: a unit that fails is rolled back to it, alone, and the
 *   transaction carries on, so a handler that catches a unique violation and
 *   goes on works as it did. The savepoint goes out with the unit's first
 *   statement on a pipelined connection, and costs a round trip otherwise.
 *   With `unitSavepoints: false` there is none: a unit's database failure
 *   aborts the transaction, and later units are refused with
 *   `UnitFailedWithoutSavepointError`.
 * - **Closed once the flow has sent COMMIT or ROLLBACK.** A statement on
 *   the runner after that throws `TransactionClosedError`, whatever path it
 *   took, rather than run on a connection that went back to the pool.
 * - **Lost with its connection.** TypeORM releases a runner whose
 *   connection fails. A statement after that, while the flow still waits on
 *   the handler, fails as TypeORM fails it (`QueryRunnerAlreadyReleasedError`,
 *   answered 503: retry with the same key), whatever path it took, rather
 *   than commit on its own on another connection and run again on the retry.
 *
 * Inside a unit (a `transaction()` callback, what a `save()` runs) the
 * statements run as TypeORM sends them, as in any transaction.
 */
export class RequestTransaction implements TransactionHooks {
  /** The last unit's end: the next one starts after it. */
  private lastUnit: Promise<unknown> = Promise.resolve();
  /** A unit ran: its savepoint, if it took one, is released before the next one is taken. */
  private taken = false;
  private readonly query: QueryRunner['query'];
  /** What the running unit's COMMIT would have ended. */
  private readonly scoped: CommitScopedState;
  private readonly savepoints: boolean;
  /** Savepoints taken so far: each unit that writes is a subtransaction with an xid of its own. */
  private savepointsTaken = 0;

  private constructor(
    private readonly runner: QueryRunner,
    private readonly channel: SavepointChannel,
    { isolation, deferredConstraints, savepoints }: RequestTransactionTerms,
  ) {
    this.query = runner.query;
    this.scoped = new CommitScopedState(isolation, deferredConstraints);
    this.savepoints = savepoints;
  }

  /**
   * Wraps `runner` (its `query()`, its manager's atomic methods, its
   * transaction events) for the handler's code.
   *
   * TypeORM announces a commit when a nested transaction releases its
   * savepoint; inside the request that is no commit at all, so those events
   * are held back, and fired once, at the request's real COMMIT. A nested
   * transaction's rollback to its savepoint is a real rollback of its work,
   * and fires as TypeORM fires it; the request's ROLLBACK fires once more.
   */
  static install(runner: QueryRunner, channel: SavepointChannel, terms: RequestTransactionTerms): RequestTransaction {
    const transaction = new RequestTransaction(runner, channel, terms);
    const broadcaster = runner.broadcaster as unknown as { broadcast: Broadcast };
    const broadcast = broadcaster.broadcast.bind(broadcaster);
    transaction.broadcast = broadcast;
    // TypeORM checks the depth after releasing: 2 or more before the RELEASE, 1 or more after it, is a savepoint's.
    broadcaster.broadcast = (event, ...args) =>
      COMMIT_EVENTS.has(event) && (runner as unknown as { transactionDepth: number }).transactionDepth >= (event === 'BeforeTransactionCommit' ? 2 : 1) ? Promise.resolve() : broadcast(event, ...args);
    channel.hookInto(transaction);
    runner.query = ((...args: unknown[]) =>
      units.getStore() === transaction.ownScope ? transaction.send(args) : transaction.unit(() => transaction.statement(args))) as QueryRunner['query'];
    const manager = runner.manager as unknown as Record<(typeof ATOMIC_METHODS)[number], (...args: unknown[]) => Promise<unknown>>;
    for (const name of ATOMIC_METHODS) {
      const method = manager[name];
      manager[name] = (...args: unknown[]) => {
        if (name !== 'transaction') return transaction.unit(() => method.apply(manager, args));
        transaction.scoped.checkNested(args[0]);
        if (units.getStore() === transaction) return method.apply(manager, args);
        // TypeORM takes a savepoint of its own for it, and rolls a failure back to it.
        return transaction.unit(() => endedAsCommitWould(method, manager, args), true);
      };
    }
    byRunner.set(runner, transaction);
    return transaction;
  }

  /** Where the module's own statements run (the claim, COMMIT, through TypeORM's API): sent as they are, open or not. */
  private readonly ownScope = {};
  /** TypeORM's own broadcast of the runner's events. */
  private broadcast?: Broadcast;
  /** Transaction libraries waiting for the end of the handler's transaction; each is told once. */
  private readonly ends: TransactionEnd[] = [];

  /** Tells `end` how the handler's transaction ended: at the request's COMMIT or ROLLBACK, or where the flow rolled the handler's work back. */
  hookInto(end: TransactionEnd): void {
    this.ends.push(end);
  }

  beforeCommit(): Promise<void> {
    return this.fire('BeforeTransactionCommit', this);
  }

  /** After COMMIT, what the hook writes runs on the connection on its own (autocommit), as after the app's own COMMIT. */
  async afterCommit(): Promise<void> {
    await this.fire('AfterTransactionCommit', this.ownScope);
    await Promise.all(this.ends.splice(0).map((end) => end.afterCommit()));
  }

  beforeRollback(): Promise<void> {
    return this.fire('BeforeTransactionRollback', this);
  }

  async afterRollback(error?: unknown): Promise<void> {
    await this.fire('AfterTransactionRollback', this.ownScope);
    await this.handlerRolledBack(error);
  }

  /**
   * The flow rolled the handler's work back to a savepoint taken before it
   * ran (a failure the route records as its outcome): to the libraries'
   * hooks that is their transaction's rollback, though the request then
   * commits its record.
   */
  async handlerRolledBack(error: unknown): Promise<void> {
    await Promise.all(this.ends.splice(0).map((end) => end.afterRollback(error)));
  }

  /**
   * Fires a transaction event for the request's own end, once, where the
   * handler ran something in it and TypeORM does not fire it itself: before
   * the end, what a hook writes goes into the transaction, as it would into
   * the app's own.
   */
  private async fire(event: string, scope: object): Promise<void> {
    if (this.channel.firesTypeOrmEvents || !this.taken || !this.broadcast || subscribersOf(this.runner) === 0) return;
    const broadcast = this.broadcast;
    await units.run(scope, () => broadcast(event));
  }

  /** One statement of the handler's: looked at for state a COMMIT would end, then sent. */
  private statement(args: unknown[]): Promise<unknown> {
    const looked = this.scoped.before(args[0], args[1] as unknown[] | undefined, this.ownQuery);
    if (!looked) return this.send(args).catch(this.failed);
    return looked.then((replacement) => this.send(replacement ? [replacement.sql, [], ...args.slice(2)] : args).catch(this.failed));
  }

  private send(args: unknown[]): Promise<unknown> {
    return (this.query as (...args: unknown[]) => Promise<unknown>).apply(this.runner, args);
  }

  /** The module's own statements inside a unit, past the wrappers, through TypeORM; answers the rows. */
  private readonly ownQuery: OwnQuery = (sql, parameters) => this.query.call(this.runner, sql, parameters);

  /** Sends statements of the module's own now, in one write where pipelined; the first failure throws. */
  private readonly sendOwn = async (statements: string[]): Promise<void> => {
    if (!this.channel.pipelined) {
      await this.channel.enqueue(statements.join('; '));
      return;
    }
    await Promise.all(statements.map((sql) => this.channel.enqueue(sql)));
  };

  /** The request transaction installed on `runner`, if any. */
  static of(runner: QueryRunner): RequestTransaction | undefined {
    return byRunner.get(runner);
  }

  /** Runs the module's own statements on `runner` (the claim, COMMIT) past the wrappers a request's transaction put on it. */
  static ownStatements<T>(runner: QueryRunner, work: () => Promise<T>): Promise<T> {
    const transaction = byRunner.get(runner);
    return transaction ? units.run(transaction.ownScope, work) : work();
  }

  /** Set once the handler's own work has settled: later units are refused, though the flow still has statements to send. */
  private shutToHandler = false;

  get isOpen(): boolean {
    return this.channel.open && !this.shutToHandler && !this.runner.isReleased;
  }

  /**
   * Refuses every unit from now on, with `TransactionClosedError`: the flow
   * calls it once the handler has settled, so that nothing it left behind
   * (a timer, a promise it did not await) slips in before COMMIT.
   */
  shut(): void {
    this.shutToHandler = true;
  }

  /** The connection failed before the flow sent COMMIT or ROLLBACK, and TypeORM released the runner. */
  get connectionLost(): boolean {
    return this.channel.open && !this.shutToHandler && this.runner.isReleased;
  }

  /**
   * The first serialization failure or deadlock a statement of the handler's
   * met, caught or not: the transaction's view or locks were what PostgreSQL
   * gave up on, so the request rolls back and its retry runs afresh.
   */
  conflict?: unknown;

  private readonly failed = (error: unknown): never => {
    if (this.conflict === undefined && transactionConflictOf(error)) this.conflict = error;
    throw error;
  };

  /**
   * Without unit savepoints, the database failure of a unit: PostgreSQL
   * aborted the whole transaction there, so no later unit runs, and a
   * handler that caught it and returned answers `UnitFailedWithoutSavepointError`.
   */
  abortedBy?: UnitFailedWithoutSavepointError;

  /** What a statement meets once the transaction is not open. */
  closedError(): Error {
    return this.connectionLost ? new QueryRunnerAlreadyReleasedError() : new TransactionClosedError();
  }

  /**
   * Settles once every unit started so far has: the flow waits for it
   * before COMMIT or ROLLBACK, so that a write the handler started without
   * awaiting it, while the transaction was open, is part of it, rather than
   * turned away halfway.
   */
  drain(): Promise<unknown> {
    return this.lastUnit;
  }

  /**
   * Runs `work` as a unit of the request's transaction (see the class), or
   * as part of the unit the caller already runs in. `ownSavepoint`: `work`
   * rolls its own failure back (a nested `transaction()`), so without unit
   * savepoints that failure does not abort the request's transaction.
   */
  unit<T>(work: () => Promise<T>, ownSavepoint = false): Promise<T> {
    const scope = units.getStore();
    if (scope === this || scope === this.ownScope) return work();
    if (!this.isOpen) return Promise.reject(this.closedError());
    if (this.abortedBy) return Promise.reject(this.abortedBy);
    // Most units find no other in flight: they start now, without waiting a turn.
    const idle = this.running++ === 0;
    const started = idle ? this.inSavepoint(work, ownSavepoint) : this.lastUnit.then(() => this.inSavepoint(work, ownSavepoint));
    this.lastUnit = started.then(this.ended, this.ended);
    return started;
  }

  /** Units started and not yet ended. */
  private running = 0;
  private readonly ended = (): void => {
    this.running--;
  };

  private async inSavepoint<T>(work: () => Promise<T>, ownSavepoint: boolean): Promise<T> {
    if (!this.isOpen) throw this.closedError();
    if (this.abortedBy) throw this.abortedBy;
    const savepoint = !this.savepoints ? undefined : this.taken ? [RELEASE, SAVEPOINT] : [SAVEPOINT];
    this.taken = true;
    if (savepoint && ++this.savepointsTaken === CACHED_SUBTRANSACTIONS + 1) warnOfOverflow();
    if (savepoint) {
      // One query, RELEASE and SAVEPOINT together: one message and one answer for the server and for node-postgres.
      const sent = this.channel.enqueue(savepoint.join('; '));
      // Pipelined, it goes out ahead of the unit's first statement, in the same write; a failure fails that statement too.
      if (this.channel.pipelined) sent.catch(() => undefined);
      else await sent;
    }
    this.scoped.reset();
    try {
      const result = await units.run(this, work);
      if (this.scoped.hasEnd) await units.run(this, () => this.scoped.end(this.ownQuery, this.sendOwn));
      return result;
    } catch (error) {
      if (!this.savepoints) {
        // A failure PostgreSQL answered aborted the transaction; one raised before anything was sent did not.
        if (!ownSavepoint && SQLSTATE.test(sqlStateOf(error) ?? '')) this.abortedBy ??= new UnitFailedWithoutSavepointError(error);
        throw error;
      }
      // Before the caller sees the failure: the transaction is usable again when it does.
      if (this.isOpen) await this.channel.enqueue(ROLLBACK_TO).catch(() => undefined);
      throw error;
    }
  }
}

function warnOfOverflow(): void {
  if (warnedOverflow) return;
  warnedOverflow = true;
  new Logger('Idempotency').warn(
    `A request's transaction took more than ${CACHED_SUBTRANSACTIONS} savepoints, one per unit of its handler's writes: past that many subtransactions PostgreSQL's snapshots overflow, ` +
      'and while such transactions run, readers (on a standby above all) look up the transaction of every recent row in pg_subtrans, which slows them down sharply once a long transaction is open. ' +
      'Write in fewer units (one insert() of many rows, or the writes inside one transaction() callback), or set unitSavepoints: false if the handler lets its database errors propagate.',
  );
}

/** The number of TypeORM subscribers of the runner's DataSource (`dataSource` in 1.x, `connection` in 0.3). */
function subscribersOf(runner: QueryRunner): number {
  const source = (runner as unknown as { dataSource?: { subscribers: unknown[] } }).dataSource ?? runner.connection;
  return source.subscribers.length;
}

/**
 * A `transaction(fn)` that would have been a transaction of its own. When a
 * statement inside it failed and `fn` caught that and returned, PostgreSQL
 * answers its COMMIT by rolling it back, without an error, and
 * `transaction()` resolves. Joined, it is a savepoint, whose RELEASE fails
 * instead (25P02); TypeORM then rolls back to it and rejects. Resolve with
 * `fn`'s result, as the COMMIT would have.
 */
async function endedAsCommitWould(transaction: (...args: unknown[]) => Promise<unknown>, manager: object, args: unknown[]): Promise<unknown> {
  // transaction(fn) or transaction(isolation, fn); DataSource.transaction() passes both, the level undefined.
  const at = typeof args[0] === 'function' ? 0 : 1;
  const work = args[at] as (manager: unknown) => Promise<unknown>;
  let returned: { value: unknown } | undefined;
  const tracked = async (inner: unknown) => {
    const value = await work(inner);
    returned = { value };
    return value;
  };
  try {
    return await transaction.apply(manager, args.map((arg, index) => (index === at ? tracked : arg)));
  } catch (error) {
    if (returned && sqlStateOf(error) === IN_FAILED_TRANSACTION) return returned.value;
    throw error;
  }
}

/** A code PostgreSQL answers with, not one of Node's (`ECONNRESET`). */
const SQLSTATE = /^[0-9A-Z]{5}$/;

/** "current transaction is aborted, commands ignored until end of transaction block". */
const IN_FAILED_TRANSACTION = '25P02';
