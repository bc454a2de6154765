import { HttpException } from '@nestjs/common';
import { isNamedStatementLost } from './named-statements.js';
import { IdempotencyDatabaseUnavailableException } from '../errors/idempotency.exceptions.js';
import { KEY_HELD_AT_COMMIT } from '../records/record.statements.js';

const LOCK_NOT_AVAILABLE = '55P03';
const INVALID_TEXT_REPRESENTATION = '22P02';

/** SQLSTATE classes and codes of a lost or refused connection: the connection exception class, shutdowns, too many connections. */
const CONNECTION_LOST_CODE = /^(08|57P0[123]$|53300$|E(CONNREFUSED|CONNRESET|PIPE|TIMEDOUT)$)/;
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
 * A lost database connection answers 503 with Retry-After, not a 500 that
 * reads as final; so does a named statement a pooler lost, since the module
 * sends its statements unnamed from then on and the retry goes through.
 */
export function asUnavailable(error: unknown): never {
  throw (isConnectionLost(error) || isNamedStatementLost(error)) && !(error instanceof HttpException) ? new IdempotencyDatabaseUnavailableException(1) : error;
}

/** The claim waited its `lock_timeout` out on a concurrent owner's row. */
export function isLockTimeout(error: unknown): boolean {
  const failure = error as { code?: string; driverError?: { code?: string } };
  return (failure.driverError?.code ?? failure.code) === LOCK_NOT_AVAILABLE;
}

/**
 * The claim at commit found the key held, and so failed its transaction:
 * COMMIT rolled everything back. Told by its message as well as its code,
 * so that a failure of the handler's own at COMMIT (a deferred trigger's) is
 * never taken for it.
 */
export function isKeyHeldAtCommit(error: unknown): boolean {
  const failure = (error as { driverError?: { code?: string; message?: string } }).driverError ?? (error as { code?: string; message?: string });
  return failure.code === INVALID_TEXT_REPRESENTATION && typeof failure.message === 'string' && failure.message.includes(KEY_HELD_AT_COMMIT);
}
