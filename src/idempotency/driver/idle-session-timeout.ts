import { Injectable } from '@nestjs/common';
import { performance } from 'node:perf_hooks';
import { isConnectionLost, sqlStateOf, transactionConflictOf } from './database-errors.js';
import { IdempotencyDatabaseUnavailableException } from '../errors/idempotency.exceptions.js';

/** "terminating connection due to idle-in-transaction timeout": the server's FATAL before it closes the session. */
const IDLE_IN_TRANSACTION_TIMEOUT = '25P03';

/** node-postgres's protocol connection under a Client: it emits each ErrorResponse the server sends as 'errorMessage'. */
interface PgConnection {
  on(event: 'errorMessage', listener: (this: object, message: { code?: unknown }) => void): unknown;
}

/** Connections listened to, each by one listener for its lifetime. */
const watched = new WeakSet<object>();
/** Connections whose session the server ended for sitting idle in a transaction. */
const endedIdle = new WeakSet<object>();
/** Where each connection's conflicts go while a request's transaction runs on it (`onConflicts`). */
const conflictListeners = new WeakMap<object, (conflict: unknown) => void>();

/**
 * Shared by every connection, so that watching one allocates nothing. The
 * server sends the FATAL while no query is running: node-postgres then
 * fails no query with it, and the request's next statement only reads
 * "Connection terminated" or "Client has encountered a connection error".
 * A conflict is heard before the query that met it fails, whatever form
 * the query took (a promise's, a callback's, a cursor's).
 */
function noteErrorMessage(this: object, message: { code?: unknown }): void {
  if (message?.code === IDLE_IN_TRANSACTION_TIMEOUT) endedIdle.add(this);
  else if (transactionConflictOf(message)) conflictListeners.get(this)?.(message);
}

/**
 * Watches the protocol connection under a node-postgres client for the
 * server's error messages: its session ended for idling in a transaction
 * (`endedByIdleTimeout`), and conflicts (`onConflicts`). Once per
 * connection, with one listener for its lifetime, so that a request pays a
 * WeakSet look-up rather than adding and removing a listener. The event is
 * 'errorMessage', not 'error': a listener of it changes nothing of how pg,
 * the pool or TypeORM handle the connection's errors. Returns whether the
 * connection can be watched (pg-native's cannot).
 */
export function watchErrorMessages(client: { connection?: unknown }): boolean {
  const connection = client.connection as Partial<PgConnection> | undefined;
  if (typeof connection?.on !== 'function') return false;
  if (!watched.has(connection)) {
    watched.add(connection);
    connection.on('errorMessage', noteErrorMessage);
  }
  return true;
}

/**
 * Tells `listener` of each serialization failure or deadlock the server
 * reports on the client's connection, until the returned function is called
 * or another listener takes the connection over. Undefined where the
 * connection cannot be watched.
 */
export function onConflicts(client: { connection?: unknown }, listener: (conflict: unknown) => void): (() => void) | undefined {
  if (!watchErrorMessages(client)) return undefined;
  const connection = client.connection as object;
  conflictListeners.set(connection, listener);
  return () => {
    if (conflictListeners.get(connection) === listener) conflictListeners.delete(connection);
  };
}

/** Whether the server ended the session of a watched client's connection for idling in a transaction. */
export function endedByIdleTimeout(client: { connection?: unknown }): boolean {
  return endedIdle.has(client.connection as object);
}

/** A request transaction's connection, as far as it can tell why it was lost: undefined where it cannot. */
export interface IdleEndWitness {
  readonly endedByIdleTimeout: boolean | undefined;
}

/**
 * The served connections' `idle_in_transaction_session_timeout`, read once
 * at startup (module/server-settings.check.ts), and the 503 of a request
 * whose session it ended.
 */
@Injectable()
export class IdleSessionTimeout {
  /** As the server shows it ('1s'); '0' when off or not read. */
  shown = '0';
  /** In ms; 0 when off or not read. */
  ms = 0;

  /**
   * The error to answer for `error`, a request's failure once its
   * transaction was open: a lost connection whose session the server ended
   * for idling in the transaction answers a 503 that names the setting and
   * the fix. Where the connection cannot tell (`claimDriver: 'typeorm'`),
   * the handler having run longer than the setting read at startup is taken
   * for it. Any other error as it is.
   */
  explained(error: unknown, connection: IdleEndWitness | undefined, handlerStart: number | undefined): unknown {
    if (!connection || !isConnectionLost(error)) return error;
    if (sqlStateOf(error) === IDLE_IN_TRANSACTION_TIMEOUT || connection.endedByIdleTimeout) {
      return this.unavailable(`PostgreSQL ended the session, whose transaction sat idle longer than ${this.setting()} allows`);
    }
    const outlasted = this.ms > 0 && handlerStart !== undefined && performance.now() - handlerStart >= this.ms;
    if (connection.endedByIdleTimeout === undefined && outlasted) {
      return this.unavailable(`the handler had run longer than ${this.setting()}, which ends a session whose transaction sits idle that long`);
    }
    return error;
  }

  private setting(): string {
    return this.ms > 0 ? `idle_in_transaction_session_timeout (${this.shown})` : 'idle_in_transaction_session_timeout';
  }

  private unavailable(cause: string): IdempotencyDatabaseUnavailableException {
    return new IdempotencyDatabaseUnavailableException(
      1,
      `${cause}; nothing was recorded. A handler that waits that long between statements (an external call) meets it on every retry: ` +
        `raise or unset idle_in_transaction_session_timeout for the app's role or database, or move the slow call into a phased operation, @Idempotent({ phases: true })`,
    );
  }
}
