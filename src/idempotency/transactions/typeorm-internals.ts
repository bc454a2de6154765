import type { DataSource, EntityManager, QueryRunner } from 'typeorm';

/**
 * What the join reads and writes of TypeORM beyond its public types, in one
 * place: a QueryRunner's transaction flags and client, its event
 * broadcaster, the DataSource a runner or a manager belongs to on each
 * TypeORM line, and a manager's methods by name. The startup check
 * (`module/idempotency-compatibility.check.ts`) runs the join on the
 * installed TypeORM, and `transaction-join.spec.ts` with the
 * faithful-transaction suites pin each of these on 0.3 and 1.x.
 */

/** The node-postgres client a connected QueryRunner holds (its `databaseConnection`), as the join uses it. */
export interface RunnerClient {
  query(...args: unknown[]): unknown;
  end(...args: unknown[]): unknown;
  /** The client's server process, from its BackendKeyData; absent before it connected. */
  processID?: number | null;
  /** node-postgres's protocol connection, whose error messages the driver listens to (driver/idle-session-timeout.ts). */
  connection?: unknown;
}

/** A QueryRunner's transaction state, which TypeORM keeps in fields of its own and consults before each write. */
export interface RunnerState {
  isTransactionActive: boolean;
  transactionDepth: number;
  databaseConnection?: RunnerClient;
}

/** TypeORM's call of subscribers and transaction hooks at each boundary. */
export type Broadcast = (event: string, ...args: unknown[]) => Promise<void>;

/** The fields of `runner` TypeORM reads to tell a transaction, and the client it sends on. */
export function runnerState(runner: QueryRunner): RunnerState {
  return runner as unknown as RunnerState;
}

/** The runner's broadcaster, whose `broadcast()` TypeORM calls for every entity and transaction event. */
export function broadcasterOf(runner: QueryRunner): { broadcast: Broadcast } {
  return runner.broadcaster as unknown as { broadcast: Broadcast };
}

/** The runner's DataSource: `dataSource` in TypeORM 1.x, `connection` in 0.3. */
export function dataSourceOfRunner(runner: QueryRunner): DataSource {
  return (runner as unknown as { dataSource?: DataSource }).dataSource ?? runner.connection;
}

/**
 * The DataSource an EntityManager belongs to: its `dataSource` in TypeORM 1.x,
 * its `connection` in 0.3, which has no `dataSource` (1.x keeps `connection`
 * as a deprecated getter).
 */
export function dataSourceOf(manager: EntityManager): DataSource {
  return manager.dataSource ?? (manager as unknown as { connection: DataSource }).connection;
}

/** The methods `Name` of `manager`, to call and replace by name. */
export function methodsOf<Name extends string>(manager: EntityManager): Record<Name, (...args: unknown[]) => Promise<unknown>> {
  return manager as unknown as Record<Name, (...args: unknown[]) => Promise<unknown>>;
}
