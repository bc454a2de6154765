import type { Readable } from 'node:stream';
import { Logger } from '@nestjs/common';
import { type QueryRunner, QueryRunnerAlreadyReleasedError } from 'typeorm';
import { RequestTransactionConflictError, type SharedRollbackError, StatementRefusedError, TransactionClosedError, UnitFailedWithoutSavepointError } from '../errors/idempotency.exceptions.js';
import { sqlStateOf, transactionConflictOf } from '../driver/database-errors.js';
import { onConflicts } from '../driver/idle-session-timeout.js';
import type { IsolationLevel } from '../options/idempotency.options.js';
import { CommitScopedState, type OwnQuery } from './commit-scoped-state.js';
import { ContextSlot } from './request-context.js';
import { cursorStream } from './cursor-stream.js';
import { type ClientGuard, guardedClient, unguarded } from './guarded-client.js';
import { type JoinedRunnerHost, joinQueryRunner } from './joined-query-runner.js';
import { backendOf, type EscapedRequest } from './lock-wait-watch.js';
import { joinRequestManager, type ManagerHost } from './request-manager.js';
import { SessionIdentity } from './session-identity.js';
import { effectOf, type StatementEffect, statementText } from './transaction-control.js';
import { asciiUpperCase, firstWord } from './statement-scanner.js';
import { type StatementOwner, UserTransactions, type UserTransactionsConnection } from './user-transactions.js';
import { type Broadcast, broadcasterOf, dataSourceOfRunner, runnerState } from './typeorm-internals.js';

/** What the request's transaction keeps of the app's own transactions. */
export interface RequestTransactionTerms {
  /** The level it runs at: a nested transaction or SET TRANSACTION asking for more is refused. */
  isolation: IsolationLevel;
  /** The database's INITIALLY DEFERRED constraints, which each unit checks at its end as its COMMIT would (see `CommitScopedState`). */
  deferredConstraints: readonly string[];
  /** Whether each unit runs behind a savepoint of its own (the module's `unitSavepoints`). */
  savepoints: boolean;
  /** A QueryRunner of the served DataSource's own, on a pool connection: where work that outlives a committed request runs. */
  ownRunner: () => QueryRunner;
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
  /** The app's code dropped prepared statements of the connection (DEALLOCATE, all or those named): the module's among them are prepared again on it. */
  forgetPreparedStatements(names: 'all' | readonly string[]): void;
}

/** Where the request's transaction is, as work from its async context meets it. */
export type RequestTransactionState = 'open' | 'settling' | 'committed' | 'rolled-back' | 'connection-lost';

/** TypeORM's events for the end of a transaction; a savepoint's RELEASE fires the first two too. */
const COMMIT_EVENTS = new Set(['BeforeTransactionCommit', 'AfterTransactionCommit']);


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

/**
 * A unit of the handler's in flight (see `RequestTransaction`). Its
 * statements run inside it until it ends, even once the handler has settled:
 * the transaction waits for it (`drain`), so they must not wait for the
 * transaction in turn. Work it started that runs after its end (a timer) is
 * no longer part of it.
 */
class Unit {
  ended = false;
  constructor(readonly transaction: RequestTransaction) {}
}

/** The unit of work the caller runs in, if any (a `Unit`, or a transaction's own scope): everything it starts belongs to it. */
const units = new ContextSlot<object>('unit of work');
const byRunner = new WeakMap<QueryRunner, RequestTransaction>();
const logger = new Logger('Idempotency');

/** How a unit runs: behind a savepoint of its own (the default), or inside what is open (a statement of a transaction the app opened). */
interface UnitOptions {
  /** `work` rolls its own failure back (a nested `transaction()`), so without unit savepoints that failure does not abort the request's transaction. */
  ownSavepoint?: boolean;
  savepoint?: boolean;
}

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
 * - **Transactions the app opens are savepoints.** A QueryRunner the
 *   handler creates joins the request (`joinQueryRunner`); its
 *   `startTransaction()`, and a BEGIN sent on any path, open a savepoint
 *   that its COMMIT releases and its ROLLBACK rolls back to
 *   (`UserTransactions`). Statements that would end the request's own
 *   transaction, or cannot run in one, are refused before they are sent
 *   (`effectOf`).
 * - **Streams read from a cursor** (`cursorStream`), so that the handler's
 *   writes between their rows do not wait behind them for good.
 * - **After the end.** Work from the request's context that comes once the
 *   handler has settled waits for the end: after COMMIT it runs on a
 *   connection of its own, as it would have without the module (a saga, a
 *   timer); after ROLLBACK it throws `TransactionClosedError`, so a failed
 *   request keeps nothing.
 * - **Lost with its connection.** TypeORM releases a runner whose
 *   connection fails. A statement after that, while the flow still waits on
 *   the handler, fails as TypeORM fails it (`QueryRunnerAlreadyReleasedError`,
 *   answered 503: retry with the same key), whatever path it took, rather
 *   than commit on its own on another connection and run again on the retry.
 *
 * Inside a unit (a `transaction()` callback, what a `save()` runs) the
 * statements run as TypeORM sends them, as in any transaction.
 */
export class RequestTransaction implements TransactionHooks, JoinedRunnerHost, EscapedRequest, ManagerHost {
  /** The last unit's end: the next one starts after it. */
  private lastUnit: Promise<unknown> = Promise.resolve();
  /** The last unit took a savepoint that is not released yet: the next one releases it first. */
  private taken = false;
  /** The handler ran something in the transaction. */
  private worked = false;
  private readonly query_: QueryRunner['query'];
  /** What the running unit's COMMIT would have ended. */
  private readonly scoped: CommitScopedState;
  private readonly savepoints: boolean;
  /** Savepoints taken so far: each unit that writes is a subtransaction with an xid of its own. */
  private savepointsTaken = 0;
  /** The transactions the app's code has open. */
  private readonly users: UserTransactions;
  /** The QueryRunners the handler created, and how to give each back its own connection. */
  private readonly joinedRunners = new Map<QueryRunner, () => void>();
  private readonly identity = new SessionIdentity();
  private cursors = 0;
  private ending?: 'committed' | 'rolled-back';
  private readonly ended: Promise<'committed' | 'rolled-back'>;
  private end!: (how: 'committed' | 'rolled-back') => void;
  /** Stops hearing of the conflicts the request's connection reports (see `install`). */
  private stopHearingConflicts?: () => void;

  private constructor(
    readonly runner: QueryRunner,
    private readonly channel: SavepointChannel,
    private readonly terms: RequestTransactionTerms,
  ) {
    this.query_ = runner.query;
    this.scoped = new CommitScopedState(terms.isolation, terms.deferredConstraints);
    this.savepoints = terms.savepoints;
    this.users = new UserTransactions(this.usersConnection, terms);
    this.ended = new Promise((resolve) => {
      this.end = (how) => {
        this.ending ??= how;
        this.stopHearingConflicts?.();
        resolve(this.ending);
      };
    });
  }

  /**
   * Wraps `runner` (its `query()` and `stream()`, its manager's atomic
   * methods, its transaction events) for the handler's code.
   *
   * TypeORM announces a commit when a nested transaction releases its
   * savepoint; inside the request that is no commit at all, so those events
   * are held back, and fired once, at the request's real COMMIT. A nested
   * transaction's rollback to its savepoint is a real rollback of its work,
   * and fires as TypeORM fires it; the request's ROLLBACK fires once more.
   */
  static install(runner: QueryRunner, channel: SavepointChannel, terms: RequestTransactionTerms): RequestTransaction {
    const transaction = new RequestTransaction(runner, channel, terms);
    const broadcaster = broadcasterOf(runner);
    const state = runnerState(runner);
    const broadcast = broadcaster.broadcast.bind(broadcaster);
    transaction.broadcast = broadcast;
    // TypeORM checks the depth after releasing: 2 or more before the RELEASE, 1 or more after it, is a savepoint's.
    broadcaster.broadcast = (event, ...args) =>
      COMMIT_EVENTS.has(event) && state.transactionDepth >= (event === 'BeforeTransactionCommit' ? 2 : 1) ? Promise.resolve() : broadcast(event, ...args);
    channel.hookInto(transaction);
    runner.query = ((...args: unknown[]) => transaction.query(runner, args)) as QueryRunner['query'];
    // The request's client, as code that reaches it (databaseConnection, a joined runner's connect()) meets it.
    if (state.databaseConnection) {
      // Heard from the connection itself, a conflict is noted whichever path met it: the client's own query(), a cursor, a callback.
      transaction.stopHearingConflicts = onConflicts(unguarded(state.databaseConnection), (conflict) => transaction.noteConflict(conflict));
      state.databaseConnection = guardedClient(state.databaseConnection, transaction.clientGuard);
    }
    // The flow releases the runner once the transaction has ended; a release() of the handler's before that would hand its connection, mid-transaction, to other requests.
    const release = runner.release;
    runner.release = function (this: QueryRunner) {
      return transaction.accepting ? Promise.resolve() : release.call(this);
    };
    runner.stream = ((sql: string, parameters?: unknown[], onEnd?: () => void, onError?: (error: Error) => void) => transaction.stream(runner, sql, parameters, onEnd, onError)) as QueryRunner['stream'];
    joinRequestManager(runner, transaction);
    byRunner.set(runner, transaction);
    return transaction;
  }

  /** Where the module's own statements run (the claim, COMMIT, through TypeORM's API): sent as they are, open or not. */
  private readonly ownScope = {};

  /** What the guard of the request's client asks (see `guardedClient`). */
  readonly clientGuard: ClientGuard = {
    sendsOwn: () => units.get() === this.ownScope,
    closedError: () => (this.accepting ? undefined : this.closedError()),
    conflictError: (statement) => this.conflictError(statement),
  };
  /** TypeORM's own broadcast of the runner's events. */
  private broadcast?: Broadcast;
  /** Transaction libraries waiting for the end of the handler's transaction; each is told once. */
  private readonly ends: TransactionEnd[] = [];

  /** Tells `end` how the handler's transaction ended: at the request's COMMIT or ROLLBACK, or where the flow rolled the handler's work back. */
  hookInto(end: TransactionEnd): void {
    this.ends.push(end);
  }

  async beforeCommit(): Promise<void> {
    await this.fire('BeforeTransactionCommit', this);
    // The record is written as the role the claim ran as, whatever role the handler's code set.
    const restore = await this.identity.restoring();
    if (restore) await this.channel.enqueue(restore);
  }

  /** After COMMIT, what the hook writes runs on the connection on its own (autocommit), as after the app's own COMMIT. */
  async afterCommit(): Promise<void> {
    this.end('committed');
    // QueryRunners the handler created, and left without a transaction open, are runners of their own from now on.
    if (this.ending === 'committed') for (const [runner, detach] of this.joinedRunners) if (!this.users.has(runner)) detach();
    await this.fire('AfterTransactionCommit', this.ownScope);
    await Promise.all(this.ends.splice(0).map((end) => end.afterCommit()));
  }

  beforeRollback(): Promise<void> {
    return this.fire('BeforeTransactionRollback', this);
  }

  async afterRollback(error?: unknown): Promise<void> {
    this.end('rolled-back');
    await this.fire('AfterTransactionRollback', this.ownScope);
    await this.handlerRolledBack(error);
  }

  /**
   * The flow rolled the handler's work back to a savepoint taken before it
   * ran (a failure the route records as its outcome): to the libraries'
   * hooks that is their transaction's rollback, though the request then
   * commits its record, and work the handler left behind is refused.
   */
  async handlerRolledBack(error: unknown): Promise<void> {
    this.end('rolled-back');
    await Promise.all(this.ends.splice(0).map((end) => end.afterRollback(error)));
  }

  /**
   * Fires a transaction event for the request's own end, once, where the
   * handler ran something in it and TypeORM does not fire it itself: before
   * the end, what a hook writes goes into the transaction, as it would into
   * the app's own.
   */
  private async fire(event: string, scope: object): Promise<void> {
    if (this.channel.firesTypeOrmEvents || !this.worked || !this.broadcast || subscribersOf(this.runner) === 0) return;
    const broadcast = this.broadcast;
    await (scope === this.ownScope ? units.run(scope, () => broadcast(event)) : this.inUnitScope(() => broadcast(event)));
  }

  /** Runs `work` as the unit in flight: its statements run inside what is open, until it ends. */
  private async inUnitScope<T>(work: () => Promise<T>): Promise<T> {
    const unit = new Unit(this);
    try {
      return await units.run(unit, work);
    } finally {
      unit.ended = true;
    }
  }

  /**
   * A statement of `owner`'s: the request's runner (every path the join
   * sends there) or a QueryRunner the handler created. Run as a unit of its
   * own, or inside the transaction its owner has open, or the unit the
   * caller runs in; refused, or answered as what it means here, where it
   * would start, end or escape a transaction.
   */
  query(owner: StatementOwner, args: unknown[]): Promise<unknown> {
    const scope = units.get();
    if (scope === this.ownScope) return this.send(args);
    const inUnit = this.isUnit(scope);
    if (!this.isOpen && !(inUnit && this.accepting)) return this.late(() => this.onItsOwn(owner, args));
    const effect = effectOf(args[0]);
    if (effect?.kind === 'refused') return Promise.reject(new StatementRefusedError(effect.reason));
    const control = effect?.kind === 'begin' || effect?.kind === 'commit' || effect?.kind === 'rollback' ? effect : undefined;
    const conflicted = control ? undefined : this.conflictError(args[0]);
    if (conflicted) return Promise.reject(conflicted);
    const run = () => (control ? ((this.worked = true), this.users.run(owner, control, args)) : this.statement(owner, args, effect));
    if (inUnit) return run();
    // A transaction's own statements run inside it, without a savepoint of their own.
    return this.unit(run, { savepoint: !control && !this.users.has(owner) });
  }

  /** A stream of `owner`'s: rows from a cursor of the request's transaction, fetched a batch at a time (see `cursorStream`). */
  async stream(owner: StatementOwner, sql: string, parameters: unknown[] | undefined, onEnd?: () => void, onError?: (error: Error) => void): Promise<Readable> {
    if (!this.isOpen) return this.late(() => (owner === this.runner ? this.ownStream(sql, parameters, onEnd, onError) : (owner as QueryRunner).stream(sql, parameters, onEnd, onError)));
    const fetch = (statement: string, values?: unknown[]) => this.query(owner, [statement, values]);
    return cursorStream(fetch, `idempotency_cursor_${++this.cursors}`, sql, parameters, { onEnd, onError });
  }

  /** Binds a QueryRunner the handler created to this transaction (see `joinQueryRunner`). */
  adopt(runner: QueryRunner): QueryRunner {
    this.joinedRunners.set(runner, joinQueryRunner(runner, this));
    return runner;
  }

  async released(owner: StatementOwner): Promise<void> {
    if (this.users.has(owner) && this.isOpen) await this.unit(() => this.users.released(owner), { savepoint: false });
  }

  checkNested(level: unknown, what?: string): void {
    this.scoped.checkNested(level, what);
  }

  /** Cancels the statement of backend `pid` where it waits on a lock this transaction holds (see `LockWaitWatch`). */
  async cancelIfWaitingOnUs(pid: number): Promise<boolean> {
    const ours = backendOf(this.runner);
    if (ours === undefined || !this.channel.open) return false;
    const rows = await units.run(this.ownScope, () =>
      this.ownQuery(`SELECT pg_cancel_backend(waiting) AS cancelled FROM (SELECT $1::int AS waiting) w WHERE $2::int = ANY(pg_blocking_pids(waiting))`, [pid, ours]),
    );
    return rows.length > 0;
  }

  /**
   * One statement of the handler's: looked at for state a COMMIT would end
   * (that of the transaction its owner has open, or the unit's), then sent.
   */
  private async statement(owner: StatementOwner, args: unknown[], effect: StatementEffect | undefined): Promise<unknown> {
    // Admitted before a conflict another unit met (Promise.all), refused as those after it are.
    const conflicted = this.conflictError(args[0]);
    if (conflicted) throw conflicted;
    this.worked = true;
    this.users.noteStatement(owner, args[0]);
    const scoped = this.users.scopedOf(owner) ?? this.scoped;
    const session = effect?.kind === 'session' ? effect : undefined;
    if (session?.identity) await this.identity.before(this.ownQuery);
    const looked = scoped.before(args[0], args[1] as unknown[] | undefined, this.ownQuery);
    const replacement = looked && (await looked);
    try {
      const result = await this.send(replacement ? [replacement.sql, [], ...args.slice(2)] : args);
      if (session?.preparedStatements) this.channel.forgetPreparedStatements(session.preparedStatements);
      return result;
    } catch (error) {
      return this.failed(error);
    }
  }

  /** Rolls back the transactions the handler's code left open when it settled (see `UserTransactions.rollBackLeftOpen`). */
  rollBackLeftOpen(): Promise<void> {
    return this.users.rollBackLeftOpen();
  }

  /** A transaction the handler opened rolled back writes of other paths with it (see `SharedRollbackError`): the request rolls back. */
  get sharedRollback(): SharedRollbackError | undefined {
    return this.users.sharedRollback;
  }

  /** Whether the caller runs inside a unit of this transaction that has not ended. */
  get inUnit(): boolean {
    return this.isUnit(units.get());
  }

  private isUnit(scope: object | undefined): boolean {
    return scope instanceof Unit && scope.transaction === this && !scope.ended;
  }

  /** The request's connection, as the transactions the app opens use it. */
  private readonly usersConnection: UserTransactionsConnection = {
    // The module's own statements (savepoint commands, and answers it gives itself), past the request client's guard: after a conflict they still run.
    send: (args) => units.run(this.ownScope, () => this.send(args)),
    enqueue: (sql) => this.channel.enqueue(sql),
    releaseUnitSavepoint: async () => {
      if (this.taken && this.savepoints) await this.channel.enqueue(RELEASE);
      this.taken = false;
    },
    forgetUnitSavepoint: () => {
      this.taken = false;
    },
    endScoped: (scoped) => this.inUnitScope(() => scoped.end(this.ownQuery, this.sendOwn)),
    // The request's runner is at depth 1 in the request's transaction: deeper, TypeORM runs a transaction() callback on it.
    insideCallback: (owner) => owner === this.runner && runnerState(this.runner).transactionDepth > 1,
    takesOwnStatements: () => this.accepting,
    rolledBackFor: (owner) => {
      if (owner !== this.runner) Object.assign(owner, { isTransactionActive: false, transactionDepth: 0 });
    },
  };

  private send(args: unknown[]): Promise<unknown> {
    return (this.query_ as (...args: unknown[]) => Promise<unknown>).apply(this.runner, args);
  }

  /** The module's own statements inside a unit, past the wrappers, through TypeORM; answers the rows. */
  private readonly ownQuery: OwnQuery = (sql, parameters) => this.query_.call(this.runner, sql, parameters);

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

  /** Whether the handler's code may start work in the transaction: until the handler settles, and inside a unit in flight after that. */
  get isOpen(): boolean {
    return this.accepting && (!this.shutToHandler || this.inUnit);
  }

  /** Whether the transaction still takes statements at all: neither ended nor lost with its connection. */
  get accepting(): boolean {
    return this.channel.open && !this.runner.isReleased;
  }

  get state(): RequestTransactionState {
    if (this.ending) return this.ending;
    if (this.connectionLost) return 'connection-lost';
    return this.isOpen ? 'open' : 'settling';
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
   * Work from the request's context that comes once the transaction is
   * closed to the handler: once it ends, `onItsOwn` after COMMIT, as that
   * work would have run without the module; `TransactionClosedError` after
   * ROLLBACK, so that nothing of a failed request commits.
   */
  late<T>(onItsOwn: () => Promise<T>): Promise<T> {
    if (this.connectionLost) return Promise.reject(new QueryRunnerAlreadyReleasedError());
    return this.ended.then((how) => (how === 'committed' ? onItsOwn() : Promise.reject(new TransactionClosedError())));
  }

  /** A statement from after the request committed: on the owner's runner, its own again, or on one of the DataSource's. */
  private onItsOwn(owner: StatementOwner, args: unknown[]): Promise<unknown> {
    if (owner !== this.runner) return ((owner as QueryRunner).query as (...args: unknown[]) => Promise<unknown>)(...args);
    return this.onOwnRunner((own) => (own.query as (...args: unknown[]) => Promise<unknown>)(...args));
  }

  /** A stream on a runner of its own, given back when the stream ends, as TypeORM's query builder does. */
  private ownStream(sql: string, parameters: unknown[] | undefined, onEnd?: () => void, onError?: (error: Error) => void): Promise<Readable> {
    const own = this.terms.ownRunner();
    const release = () => void own.release();
    return own.stream(sql, parameters, () => (release(), onEnd?.()), (error: Error) => (release(), onError?.(error)));
  }

  async onOwnRunner<T>(work: (runner: QueryRunner) => Promise<T>): Promise<T> {
    const own = this.terms.ownRunner();
    try {
      return await work(own);
    } finally {
      await own.release();
    }
  }

  /**
   * The first serialization failure or deadlock a statement of the handler's
   * met, caught or not: the transaction's view or locks were what PostgreSQL
   * gave up on, so the request rolls back and its retry runs afresh. The
   * handler's statements after it are refused (`RequestTransactionConflictError`);
   * the ends of its transactions still run, so that their code unwinds as usual.
   */
  conflict?: unknown;

  /**
   * Nothing after a conflict commits: a statement would only spend the
   * server's time (a retry loop's, on the same snapshot). The savepoint
   * commands of the app's code still run, so that it unwinds as usual.
   */
  private conflictError(statement: unknown): RequestTransactionConflictError | undefined {
    return this.conflict === undefined || isSavepointCommand(statement) ? undefined : new RequestTransactionConflictError(this.conflict);
  }

  private noteConflict(error: unknown): void {
    if (this.conflict === undefined && transactionConflictOf(error)) this.conflict = error;
  }

  private readonly failed = (error: unknown): never => {
    this.noteConflict(error);
    if (NEEDS_ITS_OWN_TRANSACTION.has(sqlStateOf(error) ?? '') && error instanceof Error && !error.message.includes(OUTSIDE_HINT)) error.message += OUTSIDE_HINT;
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
   * turned away halfway. Undefined when no unit is in flight: nothing to
   * wait for, and no timer to set.
   */
  drain(): Promise<unknown> | undefined {
    return this.running === 0 ? undefined : this.lastUnit;
  }

  /**
   * Runs `work` as a unit of the request's transaction (see the class), or
   * as part of the unit the caller already runs in.
   */
  unit<T>(work: () => Promise<T>, options: UnitOptions = {}): Promise<T> {
    const scope = units.get();
    if (scope === this.ownScope || this.isUnit(scope)) return work();
    if (!this.isOpen) return Promise.reject(this.closedError());
    if (this.abortedBy) return Promise.reject(this.abortedBy);
    // Most units find no other in flight: they start now, without waiting a turn.
    const idle = this.running++ === 0;
    const started = idle ? this.inSavepoint(work, options) : this.lastUnit.then(() => this.inSavepoint(work, options));
    this.lastUnit = started.then(this.unitEnded, this.unitEnded);
    return started;
  }

  /** Units started and not yet ended. */
  private running = 0;
  private readonly unitEnded = (): void => {
    this.running--;
  };

  private async inSavepoint<T>(work: () => Promise<T>, { ownSavepoint = false, savepoint = true }: UnitOptions): Promise<T> {
    // A unit admitted while the transaction was open runs, though its turn may come once the handler has settled: drain() waits for it.
    if (!this.accepting) throw this.closedError();
    if (this.abortedBy) throw this.abortedBy;
    this.worked = true;
    // Without a savepoint of its own, a unit runs inside what is open, never inside the savepoint of the unit before it.
    const sql = !this.savepoints ? undefined : savepoint ? (this.taken ? `${RELEASE}; ${SAVEPOINT}` : SAVEPOINT) : this.taken ? RELEASE : undefined;
    this.taken = this.savepoints && savepoint;
    if (sql && savepoint && ++this.savepointsTaken === CACHED_SUBTRANSACTIONS + 1) warnOfOverflow();
    if (sql) {
      // One query, RELEASE and SAVEPOINT together: one message and one answer for the server and for node-postgres.
      const sent = this.channel.enqueue(sql);
      // Pipelined, it goes out ahead of the unit's first statement, in the same write; a failure fails that statement too.
      if (this.channel.pipelined) sent.catch(() => undefined);
      else await sent;
    }
    if (!savepoint) return this.inUnitScope(work);
    this.scoped.reset();
    try {
      const result = await this.inUnitScope(work);
      if (this.scoped.hasEnd) await this.inUnitScope(() => this.scoped.end(this.ownQuery, this.sendOwn));
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
  logger.warn(
    `A request's transaction took more than ${CACHED_SUBTRANSACTIONS} savepoints, one per unit of its handler's writes: past that many subtransactions PostgreSQL's snapshots overflow, ` +
      'and while such transactions run, readers (on a standby above all) look up the transaction of every recent row in pg_subtrans, which slows them down sharply once a long transaction is open. ' +
      'Write in fewer units (one insert() of many rows, or the writes inside one transaction() callback), or set unitSavepoints: false if the handler lets its database errors propagate.',
  );
}

/** The number of TypeORM subscribers of the runner's DataSource. */
function subscribersOf(runner: QueryRunner): number {
  return dataSourceOfRunner(runner).subscribers.length;
}

/** `SAVEPOINT`, `RELEASE [SAVEPOINT]`, `ROLLBACK TO [SAVEPOINT]`: a transaction of the app's code inside the request, begun or ended. */
function isSavepointCommand(statement: unknown): boolean {
  const sql = statementText(statement);
  const word = sql === undefined ? undefined : firstWord(sql);
  return word !== undefined && SAVEPOINT_COMMANDS.has(asciiUpperCase(word));
}

const SAVEPOINT_COMMANDS = new Set(['SAVEPOINT', 'RELEASE', 'ROLLBACK']);

/** A code PostgreSQL answers with, not one of Node's (`ECONNRESET`). */
const SQLSTATE = /^[0-9A-Z]{5}$/;

/**
 * "… cannot run inside a transaction block" (25001: VACUUM, CREATE INDEX
 * CONCURRENTLY, CREATE DATABASE) and "invalid transaction termination"
 * (2D000: a procedure or DO block that commits, called inside one).
 */
const NEEDS_ITS_OWN_TRANSACTION = new Set(['25001', '2D000']);
const OUTSIDE_HINT =
  ' (inside an @Idempotent() request every statement runs in the request’s transaction: run this one in a transaction of its own with IdempotencyTransactionHost.outside(() => dataSource.query(…)))';
