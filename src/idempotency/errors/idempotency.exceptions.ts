import { HttpException, HttpStatus } from '@nestjs/common';

/** Stable RFC 9457 problem `type` URIs of the errors this module produces. */
export const IdempotencyProblemType = {
  KeyMissing: 'urn:nest-idempotency:problem:key-missing',
  KeyMalformed: 'urn:nest-idempotency:problem:key-malformed',
  KeyReused: 'urn:nest-idempotency:problem:key-reused',
  RequestInProgress: 'urn:nest-idempotency:problem:request-in-progress',
  UnstorableResponse: 'urn:nest-idempotency:problem:unstorable-response',
  OperationFailed: 'urn:nest-idempotency:problem:operation-failed',
  RequestNotCanonical: 'urn:nest-idempotency:problem:request-not-canonical',
  DatabaseUnavailable: 'urn:nest-idempotency:problem:database-unavailable',
  TransactionConflict: 'urn:nest-idempotency:problem:transaction-conflict',
  OperationUnfinished: 'urn:nest-idempotency:problem:operation-unfinished',
  RecordUndecryptable: 'urn:nest-idempotency:problem:record-undecryptable',
  BodyTooLarge: 'urn:nest-idempotency:problem:body-too-large',
  BodyNotFingerprinted: 'urn:nest-idempotency:problem:body-not-fingerprinted',
  BodyIncomplete: 'urn:nest-idempotency:problem:body-incomplete',
  TenantUnresolved: 'urn:nest-idempotency:problem:tenant-unresolved',
} as const;

/** An RFC 9457 problem details document. */
export interface ProblemDetails {
  type: string;
  title: string;
  status: number;
  detail: string;
}

/** Base of every error this module answers with; rendered as `application/problem+json`. */
export class IdempotencyProblem extends HttpException {
  constructor(
    readonly problem: ProblemDetails,
    /** Extra response headers, such as `Retry-After`. */
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(problem, problem.status);
  }
}

/** 400: a route that requires a key got none. */
export class IdempotencyKeyMissingException extends IdempotencyProblem {
  constructor(headerName: string) {
    super({
      type: IdempotencyProblemType.KeyMissing,
      title: 'Idempotency key missing',
      status: HttpStatus.BAD_REQUEST,
      detail: `This operation requires an ${headerName} header.`,
    });
  }
}

/** 400: the key header is repeated, empty, too long or holds invalid characters. */
export class IdempotencyKeyMalformedException extends IdempotencyProblem {
  constructor(headerName: string, reason: string) {
    super({
      type: IdempotencyProblemType.KeyMalformed,
      title: 'Idempotency key malformed',
      status: HttpStatus.BAD_REQUEST,
      detail: `The ${headerName} header is malformed: ${reason}. Send 1 to 255 visible ASCII characters, bare or as a quoted string.`,
    });
  }
}

/**
 * 401: the `tenant` resolver found no tenant for the request, so its key
 * belongs to no one's scope: refused before anything is claimed or run,
 * rather than put in a scope other callers share. Usually a request that
 * reached the route without the authentication the resolver reads.
 */
export class IdempotencyTenantUnresolvedException extends IdempotencyProblem {
  constructor(operation: string) {
    super({
      type: IdempotencyProblemType.TenantUnresolved,
      title: 'Tenant unresolved',
      status: HttpStatus.UNAUTHORIZED,
      detail: `${operation}: the \`tenant\` resolver found no tenant for this request, so its key has no scope. Send the request with the credentials that name its tenant.`,
    });
  }
}

/** 400: the request holds values RFC 8785 cannot canonicalise (lone surrogates, say), so it has no fingerprint. */
export class IdempotencyRequestNotCanonicalException extends IdempotencyProblem {
  constructor(reason: string) {
    super({
      type: IdempotencyProblemType.RequestNotCanonical,
      title: 'Request cannot be fingerprinted',
      status: HttpStatus.BAD_REQUEST,
      detail: `The request holds a value with no canonical JSON form (RFC 8785): ${reason}.`,
    });
  }
}

/** 422: the key was already used for a request with different content. */
export class IdempotencyKeyReusedException extends IdempotencyProblem {
  constructor() {
    super({
      type: IdempotencyProblemType.KeyReused,
      title: 'Idempotency key reused',
      status: HttpStatus.UNPROCESSABLE_ENTITY,
      detail: 'This key was already used for a different request. Use a new key for a new operation.',
    });
  }
}

/** 409: a request with the same key is still in flight. */
export class IdempotencyRequestInProgressException extends IdempotencyProblem {
  constructor(retryAfterSeconds: number) {
    super(
      {
        type: IdempotencyProblemType.RequestInProgress,
        title: 'Request in progress',
        status: HttpStatus.CONFLICT,
        detail: 'A request with this key is still being processed. Retry after the delay given in Retry-After.',
      },
      { 'Retry-After': String(retryAfterSeconds) },
    );
  }
}

/**
 * 503: the database connection failed mid-request. The work rolled back, or
 * (when it failed at COMMIT) may have committed: either way a retry with the
 * same key is safe, and replays the outcome if there is one. `cause`, where
 * the module knows it (PostgreSQL's `idle_in_transaction_session_timeout`),
 * joins the detail with its fix.
 */
export class IdempotencyDatabaseUnavailableException extends IdempotencyProblem {
  constructor(retryAfterSeconds: number, cause?: string) {
    super(
      {
        type: IdempotencyProblemType.DatabaseUnavailable,
        title: 'Database unavailable',
        status: HttpStatus.SERVICE_UNAVAILABLE,
        detail: `The database connection failed while this request ran${cause ? `: ${cause}` : ''}. Retry with the same key after the delay given in Retry-After.`,
      },
      { 'Retry-After': String(retryAfterSeconds) },
    );
  }
}

/**
 * 503: PostgreSQL ended the request's transaction to resolve a conflict with
 * a concurrent one: a serialization failure (SQLSTATE 40001) or a deadlock
 * (40P01). Nothing of the request was kept or recorded, so its retry with
 * the same key runs it afresh. Locks the handler's statements take are held
 * until the request commits, longer than they would be without the module,
 * so deadlocks can happen here that would not without it.
 */
/** What PostgreSQL gave up on: a serialization failure (40001), a deadlock (40P01), a lock not obtained at once or in time (55P03). */
export type TransactionConflict = 'serialization' | 'deadlock' | 'lock';

const CONFLICTS: Readonly<Record<TransactionConflict, string>> = {
  serialization: 'A serialization failure against a concurrent transaction',
  deadlock: 'A deadlock with a concurrent transaction',
  lock: 'A lock held by a concurrent transaction, which a statement would not wait for (NOWAIT) or waited for past its lock_timeout,',
};

export class IdempotencyTransactionConflictException extends IdempotencyProblem {
  constructor(retryAfterSeconds: number, reason: TransactionConflict) {
    super(
      {
        type: IdempotencyProblemType.TransactionConflict,
        title: 'Transaction conflict',
        status: HttpStatus.SERVICE_UNAVAILABLE,
        detail: `${CONFLICTS[reason]} rolled this request back, and nothing was recorded. Retry with the same key after the delay given in Retry-After.`,
      },
      { 'Retry-After': String(retryAfterSeconds) },
    );
  }
}

/**
 * 503: a phased operation started and did not finish (an external call's
 * outcome is unclear, or it failed after a phase committed). Its effects may
 * exist, and a retry with the same key, or the reaper, resumes it: the
 * client must retry with the same key, never with a new one.
 */
export class IdempotencyOperationUnfinishedException extends IdempotencyProblem {
  constructor(retryAfterSeconds: number, reason?: string) {
    super(
      {
        type: IdempotencyProblemType.OperationUnfinished,
        title: 'Operation unfinished',
        status: HttpStatus.SERVICE_UNAVAILABLE,
        detail: `This operation started and did not finish${reason ? ` (${reason})` : ''}. It resumes where it stopped: retry with the same key after the delay given in Retry-After.`,
      },
      { 'Retry-After': String(retryAfterSeconds) },
    );
  }
}

/** 500: the handler answered with something that cannot be recorded, such as a stream. Nothing was kept. */
export class UnstorableResponseException extends IdempotencyProblem {
  constructor(what: string, fix: string) {
    super({
      type: IdempotencyProblemType.UnstorableResponse,
      title: 'Response cannot be recorded',
      status: HttpStatus.INTERNAL_SERVER_ERROR,
      detail: `An idempotent route answered with ${what}, which cannot be replayed. Its work was rolled back. ${fix}`,
    });
  }
}

/** 413: a body no parser had read, larger than the module reads to fingerprint it (`maxBodyBytes`). */
export class IdempotencyBodyTooLargeException extends IdempotencyProblem {
  constructor(limit: number) {
    super({
      type: IdempotencyProblemType.BodyTooLarge,
      title: 'Request body too large',
      status: HttpStatus.PAYLOAD_TOO_LARGE,
      detail: `The request body is over the ${limit} bytes an idempotent route reads to fingerprint it (maxBodyBytes).`,
    });
  }
}

/**
 * 400: the client closed the connection before the body the module was
 * reading had arrived, as body-parser answers a request aborted mid-body.
 * Nobody is left to read the answer: it is not logged as an error.
 */
export class IdempotencyBodyIncompleteException extends IdempotencyProblem {
  constructor() {
    super({
      type: IdempotencyProblemType.BodyIncomplete,
      title: 'Request body incomplete',
      status: HttpStatus.BAD_REQUEST,
      detail: 'The client closed the request before its body arrived.',
    });
  }
}

/**
 * 415: the request has a body, but whatever read it before the route left
 * nothing to fingerprint (no `body`, no `rawBody`). Refused: a retry with
 * another body must never replay this one's answer.
 */
export class IdempotencyBodyNotFingerprintedException extends IdempotencyProblem {
  constructor(operation: string) {
    super({
      type: IdempotencyProblemType.BodyNotFingerprinted,
      title: 'Request body cannot be fingerprinted',
      status: HttpStatus.UNSUPPORTED_MEDIA_TYPE,
      detail:
        `${operation}: the request body was read before the route, and left neither request.body nor request.rawBody, so the module cannot tell ` +
        `one body from another. Let a body parser set request.body, or name the fields that define the operation with @Idempotent({ fingerprint }).`,
    });
  }
}

/**
 * Why a recorded outcome could not be read back under `encryption`:
 * - `plaintext-refused`: stored in plaintext, and `acceptPlaintext` is off;
 * - `encryption-off`: sealed, and the module has no `encryption` keys;
 * - `malformed`: not a well-formed envelope;
 * - `unsupported-version`: an envelope version this module does not read;
 * - `unknown-key`: sealed with a key id that is not configured;
 * - `authentication-failed`: tampered, copied from another key, or sealed under another key with the same id.
 */
export type RecordUndecryptableReason =
  | 'plaintext-refused'
  | 'encryption-off'
  | 'malformed'
  | 'unsupported-version'
  | 'unknown-key'
  | 'authentication-failed';

/**
 * 500: the key's recorded outcome cannot be read back (see
 * `RecordUndecryptableReason`), so it is not replayed. The record stays: the
 * key is not free, the operation may have run. `reason` is for logs and
 * events; the client's problem document does not name it.
 */
export class IdempotencyRecordUndecryptableException extends IdempotencyProblem {
  constructor(readonly reason: RecordUndecryptableReason) {
    super({
      type: IdempotencyProblemType.RecordUndecryptable,
      title: 'Recorded outcome unreadable',
      status: HttpStatus.INTERNAL_SERVER_ERROR,
      detail:
        'This key has a recorded outcome that the server cannot decrypt, so it is not replayed. The operation may have run; ' +
        'the key stays taken until its record expires.',
    });
  }
}

/** Why an envelope did not open. */
export type UnsealFailure = Exclude<RecordUndecryptableReason, 'plaintext-refused' | 'encryption-off'>;

/** An envelope that did not open, and why (`reason`): `OutcomeCodec` answers it as IdempotencyRecordUndecryptableException. */
export class UnsealError extends Error {
  constructor(
    readonly reason: UnsealFailure,
    message: string,
  ) {
    super(message);
    this.name = 'UnsealError';
  }
}

/**
 * The recorded outcome of a phased operation that could not be completed
 * (out of attempts, or its operation is gone): every retry gets it.
 */
export function operationFailedOutcome(reason: string): { status: number; headers: Record<string, string>; body: string } {
  const problem: ProblemDetails = {
    type: IdempotencyProblemType.OperationFailed,
    title: 'Operation failed',
    status: HttpStatus.INTERNAL_SERVER_ERROR,
    detail: `This operation could not be completed and will not be attempted again: ${reason}. Use a new key to try anew.`,
  };
  return { status: problem.status, headers: { 'content-type': 'application/problem+json' }, body: JSON.stringify(problem) };
}

/** Thrown at startup for a configuration that cannot keep the guarantee. */
export class IdempotencyConfigurationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'IdempotencyConfigurationError';
  }
}

/**
 * A statement of an `@Idempotent()` request's handler after PostgreSQL
 * resolved a conflict against the request's transaction (a serialization
 * failure, a deadlock: `conflict`). Whatever the handler does next, the
 * request answers 503 with `Retry-After` and nothing of it commits, so its
 * statements no longer run: a retry inside the handler would meet the same
 * snapshot, behind the same locks, and fail again. The client's retry with
 * the same key runs the request afresh.
 */
export class RequestTransactionConflictError extends Error {
  constructor(readonly conflict: unknown) {
    super(
      `This @Idempotent() request's transaction already met a conflict PostgreSQL resolved against it (${(conflict as Error)?.message ?? String(conflict)}): ` +
        'it answers 503 with Retry-After and nothing of it commits, so its statements no longer run. A retry inside the handler cannot succeed in the request\'s transaction, ' +
        'whose snapshot and locks it keeps: let the error propagate, and the client\'s retry with the same Idempotency-Key runs the request afresh.',
    );
    this.name = 'RequestTransactionConflictError';
  }
}

/**
 * A write of the request failed, the handler went on, and `unitSavepoints`
 * is off: PostgreSQL aborted the request's transaction at that failure, so
 * nothing after it can run or commit.
 */
export class UnitFailedWithoutSavepointError extends Error {
  constructor(readonly failure: unknown) {
    super(
      `A database call of this @Idempotent() request failed (${(failure as Error)?.message ?? String(failure)}) and the handler went on; ` +
        'with unitSavepoints: false the request\'s transaction is aborted at its first failed statement, so nothing after it runs or commits. ' +
        'Let the error propagate, or turn unitSavepoints back on (the default) so that a caught failure undoes its own write only.',
    );
    this.name = 'UnitFailedWithoutSavepointError';
  }
}

/**
 * A database call from an idempotent request's async context once its
 * transaction has ended, on any path: an injected repository or
 * EntityManager, `dataSource.query()`, a query builder, `transaction()`,
 * `IdempotencyTransactionHost.manager`, `Outbox.add()`. It would commit on its own,
 * after the request answered (or rolled back), so it is refused, as a write
 * on a closed EntityManager is. Work meant to outlive the request starts
 * with `IdempotencyTransactionHost.outside()`.
 */
export class TransactionClosedError extends Error {
  constructor() {
    super(
      'This database call comes from work started inside an @Idempotent() request (a timer, a promise the handler did not await), ' +
        'and that request\'s transaction has already ended: it would commit on its own, after the request answered. ' +
        'Await it inside the handler, or start it with IdempotencyTransactionHost.outside() to commit it on its own.',
    );
    this.name = 'TransactionClosedError';
  }
}

/**
 * A statement of the app's that an `@Idempotent()` request's transaction
 * cannot run: it would end or escape that transaction (`PREPARE
 * TRANSACTION`, a `COMMIT` inside a `transaction()` callback), or cannot run
 * in any transaction (`DISCARD ALL`). Thrown before anything is sent, where
 * the handler can catch it; the message names the statement and the fix.
 */
export class StatementRefusedError extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = 'StatementRefusedError';
  }
}

/**
 * A connection taken straight from the pool inside an `@Idempotent()`
 * request (`driver.master.connect()`, `pool.query()`,
 * `driver.obtainMasterConnection()`): it would be a connection of its own,
 * whose writes commit apart from the request's transaction, and whose locks
 * wait on the request's. Raised before a connection is taken.
 */
export class PoolConnectionRefusedError extends Error {
  constructor() {
    super(
      'A connection taken from the pool (driver.master.connect(), pool.query(), obtainMasterConnection()) inside an @Idempotent() request would be a connection of its own: ' +
        'its writes would commit apart from the request (a retry after a failure would write them again), and its locks would wait on the request\'s. ' +
        'Write through the DataSource (dataSource.query(), a repository, dataSource.createQueryRunner()), which joins the request; for a connection of its own, take it inside IdempotencyTransactionHost.outside(() => …).',
    );
    this.name = 'PoolConnectionRefusedError';
  }
}

/**
 * A transaction the handler opened on a QueryRunner of its own rolled back
 * while writes of other paths (an injected repository, `dataSource.query()`)
 * had run inside it. Inside an `@Idempotent()` request every path shares
 * the request's connection, so the rollback undid them too, where without
 * the module they would have committed on their own: the request rolls back
 * rather than commit without them.
 */
export class SharedRollbackError extends Error {
  constructor(savepoint: string) {
    super(
      `A QueryRunner transaction of this @Idempotent() request rolled back (${savepoint}), and writes made meanwhile through other paths (repositories, dataSource.query()) ` +
        'rolled back with it: inside the request every path shares one connection, so they ran inside that transaction. The request rolls back rather than commit without them. ' +
        'Make those writes through queryRunner.manager while its transaction is open, or before or after it.',
    );
    this.name = 'SharedRollbackError';
  }
}

/**
 * PostgreSQL refused one of the module's own statements for the role it ran
 * as (42501): the app's code left another role on the connection, or the
 * app's role lacks the grants the module's tables need.
 */
export class IdempotencyPrivilegeError extends Error {
  constructor(readonly cause: unknown) {
    super(
      `PostgreSQL refused a statement of nest-idempotency on its tables (${(cause as Error)?.message ?? String(cause)}). It runs as the role the connection has at that moment: ` +
        'code of the app that sets a role on this DataSource\'s connections (SET ROLE, SET SESSION AUTHORIZATION) outside an @Idempotent() request must reset it (RESET ROLE) ' +
        'or set it for one transaction (SET LOCAL ROLE); otherwise grant that role SELECT, INSERT, UPDATE and DELETE on the module\'s tables.',
    );
    this.name = 'IdempotencyPrivilegeError';
  }
}

/**
 * A statement on a connection of its own (`IdempotencyTransactionHost.outside()`, a
 * REQUIRES_NEW transaction of the app's transaction library), started
 * inside an `@Idempotent()` request, waited for a lock that the request's
 * own transaction holds: the request waits for its handler, and the
 * handler for this statement, so neither would ever go on. The module
 * cancelled the statement.
 */
export class LockHeldByRequestError extends Error {
  constructor(
    readonly statement: string,
    readonly cause: unknown,
  ) {
    super(
      `A statement on a connection of its own (IdempotencyTransactionHost.outside(), or a REQUIRES_NEW transaction) waited for a lock that its own @Idempotent() request holds, ` +
        `and was cancelled: the request waits for its handler, and the handler for this statement (${statement.slice(0, 120)}). ` +
        'Make the write inside the request (without outside()), or before the request takes that lock.',
    );
    this.name = 'LockHeldByRequestError';
  }
}

/**
 * Why an idempotent message handler did not settle a message. `redeliver`
 * tells the transport what to do with it: redeliver later (not acknowledged),
 * or terminate it, since a redelivery would fail the same way.
 */
export class IdempotentMessageError extends Error {
  constructor(
    message: string,
    readonly redeliver: boolean,
    /** For a redelivery: how long to wait first, in ms. */
    readonly retryAfterMs?: number,
  ) {
    super(message);
    this.name = new.target.name;
  }
}
