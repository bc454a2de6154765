import { Logger } from '@nestjs/common';
import { SharedRollbackError, StatementRefusedError } from '../errors/idempotency.exceptions.js';
import { sqlStateOf } from '../driver/database-errors.js';
import type { IsolationLevel } from '../options/idempotency.options.js';
import { CommitScopedState } from './commit-scoped-state.js';
import type { StatementEffect } from './transaction-control.js';

/**
 * Who sent a statement: the request's own QueryRunner (every path the join
 * sends there: repositories, managers, `dataSource.query()`), or a
 * QueryRunner the handler created (`dataSource.createQueryRunner()`).
 * Without the module each would be a connection of its own, with a
 * transaction of its own.
 */
export type StatementOwner = object;

/** BEGIN, COMMIT or ROLLBACK, by whatever spelling. */
export type TransactionStatement = Extract<StatementEffect, { kind: 'begin' | 'commit' | 'rollback' }>;

/** What the app's transactions need of the request's connection: `RequestTransaction`. */
export interface UserTransactionsConnection {
  /** Sends a statement through TypeORM on the request's runner; its result has the shape the rest of `args` asks for. */
  send(args: unknown[]): Promise<unknown>;
  /** Sends SQL of the module's own now, ahead of what is sent after it. */
  enqueue(sql: string): Promise<unknown>;
  /** Releases the savepoint the unit before left, so that a transaction opened now does not end with it. */
  releaseUnitSavepoint(): Promise<void>;
  /** The savepoints taken inside a transaction that ended, a unit's among them, ended with it. */
  forgetUnitSavepoint(): void;
  /** Ends what a COMMIT would end of the state `scoped` tracked (see `CommitScopedState`). */
  endScoped(scoped: CommitScopedState): Promise<void>;
  /** Whether `owner` runs inside a `transaction()` callback of TypeORM's, which ends its transaction itself. */
  insideCallback(owner: StatementOwner): boolean;
  /** Whether the request's transaction still takes statements of the module's own. */
  takesOwnStatements(): boolean;
  /** `owner`'s transaction was rolled back for it: a QueryRunner of the handler's has none from now on. */
  rolledBackFor(owner: StatementOwner): void;
}

/** A transaction the app's code opened inside the request: a savepoint of the request's transaction. */
interface UserTransaction {
  readonly owner: StatementOwner;
  readonly savepoint: string;
  /** What its COMMIT would end. */
  readonly scoped: CommitScopedState;
  /**
   * Whether statements of another owner wrote inside it (while it was the
   * innermost, or in a transaction committed into it): without the module
   * they would have committed on their own, and its rollback would not have
   * undone them.
   */
  foreignWrites: boolean;
  /** Whether its owner wrote while it was open. */
  wrote: boolean;
  /**
   * Committed while a transaction opened after it was still open: its
   * savepoint is released once those above it end (see `commitUnder`).
   */
  committed: boolean;
}

/** The statements that only read: nothing of theirs is lost when a savepoint they ran in rolls back. */
const READS = /^\s*(?:SELECT|SHOW|FETCH|MOVE|DECLARE|CLOSE|VALUES|TABLE|EXPLAIN)\b/i;
/** What a statement the request answers itself is sent as: one that changes nothing, with the result shape TypeORM expects. */
const NOTHING = 'SELECT WHERE false';
/** "current transaction is aborted, commands ignored until end of transaction block". */
const IN_FAILED_TRANSACTION = '25P02';

const logger = new Logger('Idempotency');

/**
 * The transactions the app's code opens on the request's connection, by
 * any spelling (`queryRunner.startTransaction()`, `BEGIN`, what TypeORM
 * sends for a QueryRunner's `save()`), each a savepoint of the request's
 * transaction that its COMMIT releases and its ROLLBACK rolls back to.
 *
 * PostgreSQL has one transaction per connection and no nesting: each owner
 * has at most one open, and a BEGIN inside it, or a COMMIT or ROLLBACK
 * outside one, is what PostgreSQL makes of it, a warning. Owners share the
 * one connection, so their transactions nest in the order they were
 * opened, and must end in the reverse order. A rollback that undoes what
 * another owner wrote meanwhile fails the request (`SharedRollbackError`).
 */
export class UserTransactions {
  private readonly open: UserTransaction[] = [];
  private opened = 0;
  /** A rollback took writes of other owners with it: the request rolls back rather than commit without them. */
  sharedRollback?: SharedRollbackError;

  constructor(
    private readonly connection: UserTransactionsConnection,
    private readonly terms: { isolation: IsolationLevel; deferredConstraints: readonly string[] },
  ) {}

  /** Whether `owner` has a transaction open: its statements run inside it. */
  has(owner: StatementOwner): boolean {
    return this.of(owner) !== undefined;
  }

  /** What a COMMIT of the transaction `owner` has open would end; undefined without one. */
  scopedOf(owner: StatementOwner): CommitScopedState | undefined {
    return this.of(owner)?.scoped;
  }

  /** Notes a statement of `owner`'s: a write inside another owner's transaction is foreign to it. */
  noteStatement(owner: StatementOwner, sql: unknown): void {
    const innermost = this.open[this.open.length - 1];
    if (!innermost || (typeof sql === 'string' && READS.test(sql))) return;
    if (innermost.owner !== owner) innermost.foreignWrites = true;
    const own = this.of(owner);
    if (own) own.wrote = true;
  }

  /** Runs BEGIN, COMMIT or ROLLBACK of `owner`'s as the savepoint command it means here; `args`: the statement's, for the result's shape. */
  async run(owner: StatementOwner, statement: TransactionStatement, args: unknown[]): Promise<unknown> {
    const nothing = [NOTHING, [], ...args.slice(2)];
    if (this.connection.insideCallback(owner)) {
      // PostgreSQL answers BEGIN inside a transaction with a warning, and so does the module.
      if (statement.kind === 'begin') return this.connection.send(nothing);
      throw new StatementRefusedError(
        `${statement.spelled} inside a transaction() callback of an @Idempotent() request: TypeORM ends the callback's transaction itself when the callback returns ` +
          `(or throws), and inside the request that transaction is a savepoint. Remove the ${statement.spelled}: return from the callback to commit, throw to roll back.`,
      );
    }
    const open = this.of(owner);
    if (statement.kind === 'begin') {
      if (open) return this.connection.send(nothing);
      const opened = await this.begin(owner, statement);
      const result = await this.connection.send([`SAVEPOINT ${opened.savepoint}`, [], ...args.slice(2)]);
      return statement.readOnly ? this.connection.send(['SET TRANSACTION READ ONLY', [], ...args.slice(2)]) : result;
    }
    if (!open) return this.connection.send(nothing);
    if (statement.kind === 'commit' && !statement.chain && !this.isInnermost(open)) await this.commitUnder(open);
    else {
      this.checkEnd(open, statement.spelled);
      await this.end(open, statement.kind, statement.chain);
    }
    return this.connection.send(nothing);
  }

  /** `owner` gave its connection back: a transaction it left open rolls back, as it would never commit. */
  async released(owner: StatementOwner): Promise<void> {
    const open = this.of(owner);
    if (!open) return;
    this.checkEnd(open, 'release()');
    await this.end(open, 'rollback', false);
  }

  /**
   * Rolls back what the handler's code left open when it settled: a
   * QueryRunner's transaction without its commitTransaction(), a BEGIN
   * without COMMIT. Never committed without the module, it is not here.
   */
  async rollBackLeftOpen(): Promise<void> {
    if (this.open.length === 0) return;
    while (this.open.length > 0) {
      const top = this.open[this.open.length - 1];
      if (top.committed) {
        if (this.connection.takesOwnStatements()) await this.releaseCommittedOnTop();
        else {
          this.committedIntoEnclosing(top);
          this.forget(top);
        }
        continue;
      }
      this.open.pop();
      logger.warn(`A transaction the handler opened (a QueryRunner's startTransaction(), or BEGIN) was still open when it settled: it rolls back, as it would never have committed.`);
      if (top.foreignWrites) this.sharedRollback ??= new SharedRollbackError(top.savepoint);
      if (!this.connection.takesOwnStatements()) continue;
      await this.connection.enqueue(`ROLLBACK TO SAVEPOINT ${top.savepoint}; RELEASE SAVEPOINT ${top.savepoint}`);
      this.connection.rolledBackFor(top.owner);
    }
    this.connection.forgetUnitSavepoint();
  }

  /** The transaction `owner` has open, not counting those it committed while others opened after them were open. */
  private of(owner: StatementOwner): UserTransaction | undefined {
    for (let at = this.open.length - 1; at >= 0; at--) if (this.open[at].owner === owner && !this.open[at].committed) return this.open[at];
    return undefined;
  }

  private isInnermost(transaction: UserTransaction): boolean {
    return this.innermost === transaction;
  }

  /**
   * COMMIT of a transaction while one opened after it is open. Without the
   * module each had a connection of its own, and this one commits now. Here
   * its savepoint holds the later one's, which a RELEASE would end too: so
   * it ends what its COMMIT would end, is done for its owner, and its
   * savepoint is released once the ones above it have ended. Its writes
   * then count as another owner's in the transaction it ends in.
   */
  private async commitUnder(open: UserTransaction): Promise<void> {
    if (open.scoped.hasEnd) await this.connection.endScoped(open.scoped);
    open.committed = true;
  }



  private async begin(owner: StatementOwner, { isolation }: Extract<TransactionStatement, { kind: 'begin' }>): Promise<UserTransaction> {
    const { terms } = this;
    const scoped = new CommitScopedState(terms.isolation, terms.deferredConstraints);
    if (isolation) scoped.checkNested(isolation, `BEGIN ISOLATION LEVEL ${isolation}`);
    await this.connection.releaseUnitSavepoint();
    const opened: UserTransaction = { owner, savepoint: `idempotency_transaction_${++this.opened}`, scoped, foreignWrites: false, wrote: false, committed: false };
    this.open.push(opened);
    return opened;
  }

  /** Refuses to roll back `transaction` while one opened after it is open: its savepoint would take the later one's work with it. */
  private checkEnd(transaction: UserTransaction, spelled: string): void {
    if (this.isInnermost(transaction)) return;
    throw new StatementRefusedError(
      `${spelled} of a transaction while another, opened after it in the same @Idempotent() request, is still open (two QueryRunner transactions at once, in Promise.all say): ` +
        'the request\'s QueryRunners share its one connection, where each transaction is a savepoint inside the ones opened before it, and rolling this one back would undo the later one\'s writes too. ' +
        'Run such transactions one after another, or end the later one first.',
    );
  }

  /**
   * Ends a transaction the app opened: COMMIT releases its savepoint (after
   * ending what its COMMIT would end), ROLLBACK rolls back to it; AND CHAIN
   * opens the next at once. A COMMIT that fails (a deferred constraint's
   * violation) rolls it back and throws; one of a transaction a statement
   * aborted rolls it back and says nothing, as PostgreSQL answers those.
   * Transactions committed under it (`commitUnder`) end after it.
   */
  private async end(open: UserTransaction, how: 'commit' | 'rollback', chain: boolean): Promise<void> {
    try {
      if (how === 'rollback') await this.rollBack(open, chain);
      else await this.commit(open, chain);
      if (!chain) await this.releaseCommittedOnTop();
    } finally {
      this.connection.forgetUnitSavepoint();
    }
  }

  private async commit(open: UserTransaction, chain: boolean): Promise<void> {
    try {
      if (open.scoped.hasEnd) await this.connection.endScoped(open.scoped);
      await this.connection.send([`RELEASE SAVEPOINT ${open.savepoint}`]);
    } catch (error) {
      await this.rollBack(open, chain);
      if (sqlStateOf(error) !== IN_FAILED_TRANSACTION) throw error;
      return;
    }
    this.committedIntoEnclosing(open);
    if (!chain) return this.forget(open);
    open.scoped.reset();
    await this.connection.send([`SAVEPOINT ${open.savepoint}`]);
  }

  private async rollBack(open: UserTransaction, chain: boolean): Promise<void> {
    await this.connection.send([`ROLLBACK TO SAVEPOINT ${open.savepoint}`]);
    if (open.foreignWrites) this.sharedRollback ??= new SharedRollbackError(open.savepoint);
    open.foreignWrites = false;
    open.wrote = false;
    if (chain) return;
    await this.connection.send([`RELEASE SAVEPOINT ${open.savepoint}`]);
    this.forget(open);
  }

  /** Releases the savepoints of the transactions committed under others, now on top (see `commitUnder`). */
  private async releaseCommittedOnTop(): Promise<void> {
    for (let top = this.innermost; top?.committed; top = this.innermost) {
      await this.connection.send([`RELEASE SAVEPOINT ${top.savepoint}`]);
      this.committedIntoEnclosing(top);
      this.forget(top);
    }
  }

  private get innermost(): UserTransaction | undefined {
    return this.open[this.open.length - 1];
  }

  /**
   * What a committed transaction wrote, or had written into it, now lies in
   * the transaction it was opened in: where that is another owner's, its
   * rollback would undo writes that would have committed on their own.
   */
  private committedIntoEnclosing(committed: UserTransaction): void {
    const at = this.open.indexOf(committed);
    const enclosing = at > 0 ? this.open[at - 1] : undefined;
    if (enclosing && enclosing.owner !== committed.owner && (committed.wrote || committed.foreignWrites)) enclosing.foreignWrites = true;
  }

  private forget(open: UserTransaction): void {
    this.open.splice(this.open.indexOf(open), 1);
  }
}
