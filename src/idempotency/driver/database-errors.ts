import { HttpException } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { isNamedStatementLost } from './named-statements.js';
import { IdempotencyDatabaseUnavailableException, IdempotencyPrivilegeError, IdempotencyTransactionConflictException, RequestTransactionConflictError } from '../errors/idempotency.exceptions.js';
import { RECORDS_PRIMARY_KEY } from '../records/idempotency-record.entity.js';
import { KEY_HELD_AT_COMMIT } from '../records/record.statements.js';

const LOCK_NOT_AVAILABLE = '55P03';
const SERIALIZATION_FAILURE = '40001';
const DEADLOCK_DETECTED = '40P01';
const INVALID_TEXT_REPRESENTATION = '22P02';
const QUERY_CANCELED = '57014';
const INSUFFICIENT_PRIVILEGE = '42501';
const UNIQUE_VIOLATION = '23505';

/**
 * SQLSTATE classes and codes of a lost or refused connection: the connection
 * exception class, shutdowns, too many connections, a session ended for
 * idling in its transaction (25P03).
 */
const CONNECTION_LOST_CODE = /^(08|57P0[123]$|53300$|25P03$|E(CONNREFUSED|CONNRESET|PIPE|TIMEDOUT)$)/;
/**
 * Messages of a lost connection. TypeORM releases a QueryRunner whose
 * connection errors, so the next query of a request on it fails with
 * "Query runner already released", or, through an EntityManager bound to
 * it, "connection provided by a query runner was already released".
 */
const CONNECTION_LOST_MESSAGE =
  /Connection terminated|Client has encountered a connection error|timeout exceeded when trying to connect|Query runner already released|connection provided by a query runner was already released/i;

/** Whether the error says the database connection was lost or refused. */
export function isConnectionLost(error: unknown): boolean {
  const failures = [error, (error as { driverError?: unknown })?.driverError, (error as { cause?: unknown })?.cause] as Array<{ code?: unknown; message?: unknown } | undefined>;
  return failures.some((failure) => (typeof failure?.code === 'string' && CONNECTION_LOST_CODE.test(failure.code)) || (typeof failure?.message === 'string' && CONNECTION_LOST_MESSAGE.test(failure.message)));
}

/**
 * Runs a startup read again where the database ended its connection under
 * it (a restart, a failover, a terminated backend), so that a blip does not
 * fail the boot: 5 runs at most, 200 ms apart.
 */
export async function retriedOnLostConnection<T>(read: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await read();
    } catch (error) {
      if (attempt >= 5 || !isConnectionLost(error)) throw error;
      await sleep(200);
    }
  }
}

/**
 * A lost database connection answers 503 with Retry-After, not a 500 that
 * reads as final; so does a named statement a pooler lost, since the module
 * sends its statements unnamed from then on and the retry goes through; and
 * so does a serialization failure, a deadlock or a lock not obtained
 * (`NOWAIT`, `lock_timeout`: 55P03), the answers PostgreSQL gives a
 * transaction that a retry runs cleanly. Holding the request's locks until
 * it commits, the module makes such conflicts likelier than without it.
 * The claim's own lock waits never get here: they answer 409.
 */
export function asUnavailable(error: unknown): never {
  if (error instanceof HttpException) throw error;
  const conflict = transactionConflictOf(error instanceof RequestTransactionConflictError ? error.conflict : error) ?? (isLockTimeout(error) ? 'lock' : undefined);
  if (conflict) throw new IdempotencyTransactionConflictException(1, conflict);
  throw isConnectionLost(error) || isNamedStatementLost(error) ? new IdempotencyDatabaseUnavailableException(1) : error;
}

/** A serialization failure (40001) or a deadlock (40P01): PostgreSQL rolled a transaction back to resolve a conflict. */
export function transactionConflictOf(error: unknown): 'serialization' | 'deadlock' | undefined {
  const code = sqlStateOf(error);
  return code === SERIALIZATION_FAILURE ? 'serialization' : code === DEADLOCK_DETECTED ? 'deadlock' : undefined;
}

/** The SQLSTATE of a database error, whether TypeORM wrapped it (`driverError`) or not. */
export function sqlStateOf(error: unknown): string | undefined {
  const failure = error as { code?: unknown; driverError?: { code?: unknown } } | undefined;
  const code = failure?.driverError?.code ?? failure?.code;
  return typeof code === 'string' ? code : undefined;
}

/** The claim waited its `lock_timeout` out on a concurrent owner's row. */
export function isLockTimeout(error: unknown): boolean {
  return sqlStateOf(error) === LOCK_NOT_AVAILABLE;
}

/** The statement was cancelled: by the session's `statement_timeout`, or by a cancel request. */
export function isStatementCancelled(error: unknown): boolean {
  return sqlStateOf(error) === QUERY_CANCELED;
}

/**
 * The record sent with COMMIT found the key held, and so failed its
 * transaction: COMMIT rolled everything back. `recordAtCommit` fails so
 * (told by its message as well as its code), and `insertRecord` with a
 * unique violation of the records' primary key; no failure of the handler's
 * own at COMMIT (a deferred trigger's) is ever taken for it.
 */
export function isKeyHeldAtCommit(error: unknown): boolean {
  const failure = (error as { driverError?: DatabaseFailure }).driverError ?? (error as DatabaseFailure);
  if (failure.code === UNIQUE_VIOLATION) return failure.constraint === RECORDS_PRIMARY_KEY;
  return failure.code === INVALID_TEXT_REPRESENTATION && typeof failure.message === 'string' && failure.message.includes(KEY_HELD_AT_COMMIT);
}

/** The fields of a PostgreSQL error node-postgres sets, as far as they are read here. */
interface DatabaseFailure {
  code?: string;
  message?: string;
  /** The constraint a violation names. */
  constraint?: string;
}

/** A failure of one of the module's own statements, with the fix named where it is the role's (see `IdempotencyPrivilegeError`). */
export function explainedOwnFailure(error: unknown): unknown {
  return sqlStateOf(error) === INSUFFICIENT_PRIVILEGE ? new IdempotencyPrivilegeError(error) : error;
}
