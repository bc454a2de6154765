import type { EntityManager } from 'typeorm';
import type { IsolationLevel } from '../../options/idempotency.options.js';
import type { RequestTransaction } from '../request-transaction.js';

/** Runs `work`, and what it starts, with no transaction of the module's around it: `IdempotencyTransactionHost.outside()`. */
export type Outside = <T>(work: () => T) => T;

/**
 * How the module meets a transaction library of the app's
 * (typeorm-transactional, @nestjs-cls/transactional) on the DataSource it
 * serves: set up at startup, where the app uses the library, and undone at
 * shutdown.
 */
export interface LibraryJoin {
  /**
   * Runs the handler's `work` inside the library's own context for the
   * request's `transaction`, whose EntityManager is `manager`. Absent, the
   * handler runs as it is.
   */
  around?<T>(transaction: RequestTransaction, manager: EntityManager, work: () => Promise<T>): Promise<T>;
  /** The level the library starts its transactions at by default, where it sets one: the request's transaction starts at least there. */
  readonly isolation?: IsolationLevel;
  /** Puts back what the join changed. */
  undo(): void;
}
