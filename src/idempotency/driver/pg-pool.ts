import type { DataSource } from 'typeorm';

/**
 * The node-postgres Pool under TypeORM's postgres driver, which keeps it
 * as `driver.master`: `Client` is the client class of a connection, which
 * each caller describes as far as it uses one.
 */
export interface PgPool<Client> {
  /** A connection from the pool, given back with its `release()`. */
  connect(): Promise<Client>;
  /** The class the pool makes its connections with. */
  Client: new (options: unknown) => Client;
  /** The options it makes them with; `max`, the pool's size. */
  options: { max?: number };
  /** Listens for each connection it makes, before it hands it out (`'connect'`). */
  on(event: 'connect', listener: (client: Client) => void): unknown;
  off(event: 'connect', listener: (client: Client) => void): unknown;
}

/**
 * The pool under `dataSource`, where its driver has one: the one place the
 * module reads it. Its members are the caller's to check before use, since
 * another driver, or a TypeORM that keeps its pool elsewhere, has none.
 */
export function pgPoolOf<Client>(dataSource: DataSource): Partial<PgPool<Client>> | undefined {
  return (dataSource.driver as unknown as { master?: Partial<PgPool<Client>> }).master;
}
