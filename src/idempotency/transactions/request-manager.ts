import type { QueryRunner } from 'typeorm';
import { sqlStateOf } from '../driver/database-errors.js';
import { methodsOf } from './typeorm-internals.js';

/** The EntityManager methods that would run in a transaction of their own outside one: without the module, each is atomic. */
export const ATOMIC_METHODS = ['save', 'remove', 'softRemove', 'recover', 'transaction'] as const;

/** What the request's manager asks of the request's transaction: `RequestTransaction`. */
export interface ManagerHost {
  readonly isOpen: boolean;
  /** Whether the caller runs inside a unit already: a nested `transaction()` then runs as TypeORM runs it. */
  readonly inUnit: boolean;
  unit<T>(work: () => Promise<T>, options?: { ownSavepoint?: boolean }): Promise<T>;
  /** Work that comes after the transaction closed to the handler: `onItsOwn` once it committed, refused once it rolled back. */
  late<T>(onItsOwn: () => Promise<T>): Promise<T>;
  /** Runs `work` on a QueryRunner of the DataSource's own, on a pool connection. */
  onOwnRunner<T>(work: (runner: QueryRunner) => Promise<T>): Promise<T>;
  checkNested(level: unknown): void;
}

type Atomic = (...args: unknown[]) => Promise<unknown>;

/**
 * Makes each atomic method of the request's EntityManager (`save()`,
 * `remove()`, `softRemove()`, `recover()`, `transaction()`) a unit of the
 * request's transaction, as each would be a transaction of its own without
 * the module; once the request has committed, each runs on the DataSource's
 * own manager, on a connection of its own.
 */
export function joinRequestManager(runner: QueryRunner, host: ManagerHost): void {
  const manager = methodsOf<(typeof ATOMIC_METHODS)[number]>(runner.manager);
  const atomicOf = (other: QueryRunner) => methodsOf<(typeof ATOMIC_METHODS)[number]>(other.manager);
  for (const name of ATOMIC_METHODS) {
    const method = manager[name];
    manager[name] = (...args: unknown[]) => {
      if (!host.isOpen) return host.late(() => host.onOwnRunner((own) => atomicOf(own)[name](...args)));
      if (name !== 'transaction') return host.unit(() => method.apply(manager, args));
      host.checkNested(args[0]);
      if (host.inUnit) return method.apply(manager, args);
      // TypeORM takes a savepoint of its own for it, and rolls a failure back to it.
      return host.unit(() => endedAsCommitWould(method, manager, args), { ownSavepoint: true });
    };
  }
}

/**
 * A `transaction(fn)` that would have been a transaction of its own. When a
 * statement inside it failed and `fn` caught that and returned, PostgreSQL
 * answers its COMMIT by rolling it back, without an error, and
 * `transaction()` resolves. Joined, it is a savepoint, whose RELEASE fails
 * instead (25P02); TypeORM then rolls back to it and rejects. Resolve with
 * `fn`'s result, as the COMMIT would have.
 */
async function endedAsCommitWould(transaction: Atomic, manager: object, args: unknown[]): Promise<unknown> {
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

/** "current transaction is aborted, commands ignored until end of transaction block". */
const IN_FAILED_TRANSACTION = '25P02';
