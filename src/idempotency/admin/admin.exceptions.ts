import { HttpStatus } from '@nestjs/common';
import { IdempotencyProblem } from '../errors/idempotency.exceptions.js';

/** Stable RFC 9457 problem `type` URIs of what the admin refuses. */
export const AdminProblemType = {
  /** 400: a filter, cursor, id or reason that does not parse. */
  BadRequest: 'urn:nest-idempotency:problem:admin-bad-request',
  /** 403: the app's guard (the admin module's `guard`) did not let the request in. */
  Forbidden: 'urn:nest-idempotency:problem:admin-forbidden',
  /** 403: an action posted from another site than the admin page's. */
  CrossSite: 'urn:nest-idempotency:problem:admin-cross-site',
  /** 415: an action sent as anything but JSON. */
  NotJson: 'urn:nest-idempotency:problem:admin-not-json',
  /** 403: a tenant scope the caller may not see, or the outbox (its events carry no tenant) for a caller limited to some. */
  ScopeForbidden: 'urn:nest-idempotency:problem:admin-scope-forbidden',
  /** 503: a statement ran past the admin's `statementTimeout` and was cancelled; nothing was changed. */
  Timeout: 'urn:nest-idempotency:problem:admin-timeout',
  /** 503: every connection of the admin's `connections` stayed busy for as long as a statement may run. */
  Busy: 'urn:nest-idempotency:problem:admin-busy',
  /** 404: no such record (or event). */
  NotFound: 'urn:nest-idempotency:problem:admin-not-found',
  /** 409: a transaction in flight holds the record: a request, a local phase, a takeover. */
  KeyInUse: 'urn:nest-idempotency:problem:admin-key-in-use',
  /** 409: a phased operation's owner holds a live lease. */
  LeaseLive: 'urn:nest-idempotency:problem:admin-lease-live',
  /**
   * 409: a release without `force` of a record whose run may have had
   * external effects (a started phased operation, finished phases, outbox
   * events): a retry after it would do them again. The detail says what ran.
   */
  OperationStarted: 'urn:nest-idempotency:problem:admin-operation-started',
  /** 409: marking failed a record that is not an unfinished operation. */
  NotUnfinished: 'urn:nest-idempotency:problem:admin-not-unfinished',
  /** 409: requeueing an event that is not a dead letter. */
  NotDead: 'urn:nest-idempotency:problem:admin-not-dead',
  /** 409: requeueing a dead letter while an older one of its ordering key would stay dead. */
  OutOfOrder: 'urn:nest-idempotency:problem:admin-requeue-out-of-order',
} as const;

const TITLES: Record<string, [HttpStatus, string]> = {
  [AdminProblemType.BadRequest]: [HttpStatus.BAD_REQUEST, 'Bad admin request'],
  [AdminProblemType.Forbidden]: [HttpStatus.FORBIDDEN, 'Not let into the admin'],
  [AdminProblemType.CrossSite]: [HttpStatus.FORBIDDEN, 'Admin action from another site'],
  [AdminProblemType.NotJson]: [HttpStatus.UNSUPPORTED_MEDIA_TYPE, 'Admin action not JSON'],
  [AdminProblemType.ScopeForbidden]: [HttpStatus.FORBIDDEN, 'Scope not visible to this caller'],
  [AdminProblemType.Timeout]: [HttpStatus.SERVICE_UNAVAILABLE, 'Admin statement timed out'],
  [AdminProblemType.Busy]: [HttpStatus.SERVICE_UNAVAILABLE, 'Admin busy'],
  [AdminProblemType.NotFound]: [HttpStatus.NOT_FOUND, 'Not found'],
  [AdminProblemType.KeyInUse]: [HttpStatus.CONFLICT, 'Key in use'],
  [AdminProblemType.LeaseLive]: [HttpStatus.CONFLICT, 'Lease still live'],
  [AdminProblemType.OperationStarted]: [HttpStatus.CONFLICT, 'Operation started'],
  [AdminProblemType.NotUnfinished]: [HttpStatus.CONFLICT, 'Not an unfinished operation'],
  [AdminProblemType.NotDead]: [HttpStatus.CONFLICT, 'Not a dead letter'],
  [AdminProblemType.OutOfOrder]: [HttpStatus.CONFLICT, 'Requeue would break the order of its key'],
};

/**
 * What the admin refused, and why, as problem details: a request it cannot
 * read, or an action that would break the guarantee. Nothing was changed.
 */
export class AdminRefusedException extends IdempotencyProblem {
  constructor(type: (typeof AdminProblemType)[keyof typeof AdminProblemType], detail: string) {
    const [status, title] = TITLES[type];
    super({ type, title, status, detail });
  }
}

/** The HTTP status of an admin problem type. */
export function adminProblemStatus(type: string): number {
  return TITLES[type]?.[0] ?? HttpStatus.CONFLICT;
}
