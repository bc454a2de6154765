import { EventEmitter } from 'node:events';
import type { DataSource, EntityManager } from 'typeorm';
import { IdempotencyConfigurationError } from '../../errors/idempotency.exceptions.js';
import { ContextSlot } from '../request-context.js';
import type { RequestTransaction, TransactionEnd } from '../request-transaction.js';
import { wrapMethod } from '../wrap-method.js';
import type { LibraryJoin, Outside } from './library-join.js';

type Library = Pick<typeof import('typeorm-transactional'), 'runInTransaction' | 'getDataSourceByName'>;
/** Internals read to tell the library's new transactions from the app's own `transaction()` calls, and to give a decorated call hooks of its own: see `joinTypeormTransactional`. */
type Context = Pick<
  typeof import('typeorm-transactional/dist/common/index.js'),
  'getTransactionalContext' | 'getHookInContext' | 'setHookInContext' | 'getTransactionalOptions'
>;
/** The library's context store, as far as its `run()`, which each call of a method the library decorates enters, is used here. */
type ContextStore = { run<T>(callback: () => T): T };

/** An idempotent request whose handler starts inside the library's context. */
interface Start {
  readonly manager: EntityManager;
  readonly transaction: RequestTransaction;
  /**
   * `starting` until the library asks for its transaction, which is the
   * request's (`joined`); `apart` when the handler started inside a
   * transaction of the library's own, which its REQUIRED joins instead.
   */
  state: 'starting' | 'joined' | 'apart';
  /** The library's hook emitter for the request's transaction. */
  emitter?: EventEmitter | null;
  /** The hook emitters of the decorated calls that are units of the request's transaction (see `withHooksOfItsOwn`). */
  readonly units: Set<EventEmitter>;
  /** Those of the units that succeeded: their hooks fire with the request's own. */
  readonly succeeded: EventEmitter[];
}

const starts = new ContextSlot<Start>('typeorm-transactional start');

/**
 * Joins typeorm-transactional, to which the app added the served DataSource
 * as `name` (`addTransactionalDataSource()`), so that its propagation modes mean
 * inside an idempotent request what they mean inside a transaction of the
 * library's own:
 *
 * - The handler runs inside `runInTransaction()` (REQUIRED), whose
 *   `dataSource.transaction()` call is answered with the request's own
 *   transaction: its `@Transactional` methods with REQUIRED then join it
 *   inline, and `runOnTransactionCommit()`, `runOnTransactionRollback()`
 *   and `runOnTransactionComplete()` land on the library's emitter for it.
 *   That call settles only once the request has committed or rolled back,
 *   and the library fires those hooks after it settles, so they fire once,
 *   at the real end: never a commit hook for work that rolled back.
 * - Each call of a method the library decorates, inside the request, is a unit of the
 *   request's transaction, behind a savepoint (see `RequestTransaction`):
 *   a REQUIRED method that throws has its writes rolled back, as its own
 *   transaction's would be without the module, even where its caller
 *   catches the error and goes on; its hooks are its own, so that such a
 *   method's rollback hook fires then, and its commit hook never. Its inner
 *   calls join it, and its hooks, without a savepoint, as the library's
 *   REQUIRED joins an enclosing transaction.
 * - REQUIRES_NEW and NESTED call `dataSource.transaction()` under a new
 *   emitter of the library's (its `runInNewHookContext()`); such a call runs
 *   `outside()` the request, a transaction of its own on another pool
 *   connection, as without the module (the library's patched `transaction()`
 *   always opens one). The app's own `dataSource.transaction()` runs under
 *   the request's emitter, or a unit's, and joins it as a savepoint.
 *
 * Public API apart, it relies on the library's context (`dist/common`:
 * `getTransactionalContext()`, `getHookInContext()`, `setHookInContext()`,
 * `getTransactionalOptions()`'s `maxHookHandlers`, the context's `run()`,
 * which `wrapInTransaction()` enters for each call) and on the shape of
 * `wrapInTransaction()`, and on the name it sets on the DataSource
 * (`TRANSACTIONAL_DATA_SOURCE`, read before this file loads);
 * `typeorm-transactional.contract.spec.ts` pins them.
 *
 * @returns undefined where the library's context was never initialised
 * (`initializeTransactionalContext()`): none of its transactions can start.
 */
export async function joinTypeormTransactional(dataSource: DataSource, name: string, outside: Outside): Promise<LibraryJoin | undefined> {
  const library: Library | undefined = await import('typeorm-transactional').catch(() => undefined);
  if (!library) {
    throw new IdempotencyConfigurationError(
      `IdempotencyModule: the DataSource was added to typeorm-transactional (addTransactionalDataSource()), which nest-idempotency cannot load. ` +
        `Install typeorm-transactional where nest-idempotency resolves it (a dependency of the app, not of another package).`,
    );
  }
  const context: Context | undefined = await import('typeorm-transactional/dist/common/index.js').catch(() => undefined);
  if (!context) {
    throw new IdempotencyConfigurationError(
      `IdempotencyModule: this typeorm-transactional has no dist/common, which nest-idempotency reads to tell its REQUIRES_NEW from your own transaction() calls. ` +
        `Install the version nest-idempotency supports (its peerDependencies).`,
    );
  }
  if (library.getDataSourceByName(name) !== dataSource) {
    throw new IdempotencyConfigurationError(
      `IdempotencyModule: the DataSource was added to another copy of typeorm-transactional than the one nest-idempotency loads. ` +
        `Keep one copy in the app (npm ls typeorm-transactional; npm dedupe).`,
    );
  }
  try {
    context.getTransactionalContext();
  } catch {
    return undefined; // initializeTransactionalContext() has not run: none of the library's transactions can start
  }
  const emitterNow = (): EventEmitter | null => context.getHookInContext(context.getTransactionalContext());
  const store = context.getTransactionalContext() as unknown as ContextStore;
  const unwrapRun = wrapMethod(store, 'run', (run) =>
    function (this: ContextStore, callback: () => unknown) {
      const start = starts.get();
      // After the request committed, the library's methods run as they would on their own.
      if (start?.state !== 'joined' || start.transaction.state === 'committed') return run.call(this, callback);
      // A call inside a unit joins it, and its hooks, as the library's REQUIRED joins the transaction around it.
      if (start.transaction.inUnit) return run.call(this, callback);
      return run.call(this, () => start.transaction.unit(() => withHooksOfItsOwn(start, context, callback)));
    },
  );
  const unwrapTransaction = wrapMethod(dataSource, 'transaction', (transaction) =>
    function (this: DataSource, ...args: unknown[]) {
      const start = starts.get();
      if (!start || start.state === 'apart') return transaction.apply(this, args);
      if (start.state === 'starting') {
        start.state = 'joined';
        start.emitter = emitterNow();
        return inline(args, start.manager);
      }
      const emitter = emitterNow();
      return emitter === start.emitter || (emitter && start.units.has(emitter)) ? transaction.apply(this, args) : outside(() => transaction.apply(this, args));
    },
  );
  return {
    around: <T>(transaction: RequestTransaction, manager: EntityManager, work: () => Promise<T>) => runInRequest(library, name, transaction, manager, work),
    undo: () => {
      unwrapTransaction();
      unwrapRun();
    },
  };
}

/**
 * Runs the handler's `work` in the library's `runInTransaction()` on the
 * request's transaction, and answers what the handler answered, while the
 * library waits for the request's end.
 */
function runInRequest<T>(library: Library, connectionName: string, transaction: RequestTransaction, manager: EntityManager, work: () => Promise<T>): Promise<T> {
  const ended = endOf(transaction);
  const start: Start = { manager, transaction, state: 'starting', units: new Set(), succeeded: [] };
  return new Promise<T>((resolve, reject) => {
    const started = starts.run(start, () =>
      library.runInTransaction(
        () => {
          if (start.state === 'starting') start.state = 'apart';
          const handled = work();
          handled.then(resolve, reject);
          return start.state === 'joined' ? handled.then(() => ended, () => ended) : handled;
        },
        { connectionName },
      ),
    );
    // A refusal before the handler ran is the request's answer; after, the handler's own answer has gone already.
    started.catch(reject);
  });
}

/**
 * Runs a decorated call that is a unit of the request's transaction under a
 * hook emitter of its own, as the library runs a REQUIRED call that opens its
 * transaction. Failed, its writes rolled back to the unit's savepoint, its
 * rollback and end hooks fire (after the turn, as the library fires them)
 * and its commit hooks never, whatever its caller does with the error.
 * Succeeded, its hooks wait for the request's end and fire with the
 * request's own: never a commit hook for work that rolled back.
 */
async function withHooksOfItsOwn(start: Start, context: Context, callback: () => unknown): Promise<unknown> {
  const hooks = new EventEmitter();
  hooks.setMaxListeners(context.getTransactionalOptions().maxHookHandlers);
  context.setHookInContext(context.getTransactionalContext(), hooks);
  start.units.add(hooks);
  try {
    const result = await callback();
    fireWithRequest(start, hooks);
    return result;
  } catch (error) {
    setImmediate(() => fire(hooks, 'rollback', error));
    throw error;
  }
}

/** Has `hooks` fire when the request's emitter does: one listener per event on it, whatever the number of units. */
function fireWithRequest(start: Start, hooks: EventEmitter): void {
  if (start.succeeded.push(hooks) > 1 || !start.emitter) return;
  start.emitter.once('commit', () => {
    for (const unit of start.succeeded) fire(unit, 'commit', undefined);
  });
  start.emitter.once('rollback', (error: unknown) => {
    for (const unit of start.succeeded) fire(unit, 'rollback', error);
  });
}

/** Fires an end on a unit's emitter as the library fires one on its own: the outcome's event, then `end`, then no more. */
function fire(hooks: EventEmitter, outcome: 'commit' | 'rollback', error: unknown): void {
  if (outcome === 'commit') hooks.emit('commit');
  else hooks.emit('rollback', error);
  hooks.emit('end', error);
  hooks.removeAllListeners();
}

/** Settles when the handler's transaction ends: resolved at COMMIT, rejected with the failure at ROLLBACK. */
function endOf(transaction: RequestTransaction): Promise<void> {
  let end!: TransactionEnd;
  const ended = new Promise<void>((resolve, reject) => {
    end = { afterCommit: async () => resolve(), afterRollback: async (error) => reject(error) };
  });
  // The library listens only once the handler has settled; a rollback before that is no unhandled rejection.
  ended.catch(() => undefined);
  transaction.hookInto(end);
  return ended;
}

/** Answers the library's `transaction([isolation,] fn)` with the request's transaction: `fn` runs on its manager, inline. */
async function inline(args: unknown[], manager: EntityManager): Promise<unknown> {
  const work = (typeof args[0] === 'function' ? args[0] : args[1]) as (manager: EntityManager) => unknown;
  return work(manager);
}
