import { StatementRefusedError } from '../errors/idempotency.exceptions.js';

/**
 * Who sent a statement: the request's own QueryRunner (every path the join
 * sends there: repositories, managers, `dataSource.query()`), or a
 * QueryRunner the handler created (`dataSource.createQueryRunner()`).
 * Without the module each would be a connection of its own, with a
 * transaction of its own.
 */
export type StatementOwner = object;

/** A transaction the app's code opened inside the request: a savepoint of the request's transaction. */
export interface UserTransaction {
  readonly owner: StatementOwner;
  readonly savepoint: string;
  /**
   * Whether statements of another owner wrote while it was the innermost:
   * without the module they would have committed on their own, and its
   * rollback would not have undone them.
   */
  foreignWrites: boolean;
}

/** The statements that only read: nothing of theirs is lost when a savepoint they ran in rolls back. */
const READS = /^\s*(?:SELECT|SHOW|FETCH|MOVE|DECLARE|CLOSE|VALUES|TABLE|EXPLAIN)\b/i;

/**
 * The transactions the app's code opens on the request's connection, by
 * any spelling (`queryRunner.startTransaction()`, `BEGIN`, what TypeORM
 * sends for a QueryRunner's `save()`), as the savepoints that stand for
 * them, innermost last. PostgreSQL has one transaction per connection and
 * no nesting: each owner has at most one open, and a second BEGIN of an
 * owner is what PostgreSQL makes of it, a warning. Owners share the one
 * connection, so their transactions nest in the order they were opened,
 * and must end in the reverse order.
 */
export class UserTransactions {
  private readonly open: UserTransaction[] = [];
  private opened = 0;

  /** The transaction `owner` has open, if any. */
  of(owner: StatementOwner): UserTransaction | undefined {
    for (let at = this.open.length - 1; at >= 0; at--) if (this.open[at].owner === owner) return this.open[at];
    return undefined;
  }

  get any(): boolean {
    return this.open.length > 0;
  }

  /** Opens one for `owner`; answers its savepoint. */
  begin(owner: StatementOwner): UserTransaction {
    const transaction: UserTransaction = { owner, savepoint: `idempotency_transaction_${++this.opened}`, foreignWrites: false };
    this.open.push(transaction);
    return transaction;
  }

  /**
   * Checks that `transaction` may end now: one opened later is still open
   * otherwise, and its savepoint would end with it.
   */
  checkEnd(transaction: UserTransaction, spelled: string): void {
    if (this.open[this.open.length - 1] === transaction) return;
    throw new StatementRefusedError(
      `${spelled} of a transaction while another, opened after it in the same @Idempotent() request, is still open: the request's QueryRunners share its one connection, ` +
        'where each transaction is a savepoint inside the ones opened before it. End the transactions in the reverse order of their start.',
    );
  }

  /** Removes an ended transaction. */
  end(transaction: UserTransaction): void {
    this.open.splice(this.open.indexOf(transaction), 1);
  }

  /** Notes a statement of `owner`'s: a write inside another owner's transaction is foreign to it. */
  noteStatement(owner: StatementOwner, sql: unknown): void {
    const innermost = this.open[this.open.length - 1];
    if (innermost && innermost.owner !== owner && !innermost.foreignWrites && !(typeof sql === 'string' && READS.test(sql))) innermost.foreignWrites = true;
  }

  /** Every one still open, innermost first, and forgets them. */
  drain(): UserTransaction[] {
    return this.open.splice(0).reverse();
  }
}
