import { STATUS_CODES } from 'node:http';
import type { IdempotencyProblem, ProblemDetails } from '../errors/idempotency.exceptions.js';
import type { RecordedOutcome } from '../outcome/recorded-outcome.js';

/** What a protected mutation field's errors carry in `extensions`. */
export interface IdempotencyGraphqlErrorExtensions {
  /** `IDEMPOTENCY_KEY_REUSED` and the like for the module's problems; for a recorded error, its own `code`, else its status's name (`PAYMENT_REQUIRED`). */
  code: string;
  /** The HTTP status the same failure gets on a route: 400, 401, 409, 422, 503, or a recorded error's. */
  status: number;
  /** The RFC 9457 problem type, e.g. `urn:nest-idempotency:problem:key-reused`. */
  type: string;
  title: string;
  /** Seconds to wait before retrying with the same key (409, 503). */
  retryAfter?: number;
  [member: string]: unknown;
}

/**
 * An error a protected mutation field answers with: the problem an HTTP
 * route would answer, as a GraphQL error. graphql-js copies the
 * `extensions` of the error a resolver throws into the response's error.
 */
export class IdempotencyGraphqlError extends Error {
  constructor(
    message: string,
    readonly extensions: IdempotencyGraphqlErrorExtensions,
  ) {
    super(message);
    this.name = 'IdempotencyGraphqlError';
  }

  /** One of the module's own problems (400, 401, 409, 422, 503, 500), with `detail` as the message unless given one. */
  static fromProblem(problem: IdempotencyProblem, message = problem.problem.detail): IdempotencyGraphqlError {
    const { type, title, status } = problem.problem;
    const retryAfter = problem.headers['Retry-After'];
    return new IdempotencyGraphqlError(message, {
      code: `IDEMPOTENCY_${type.slice(type.lastIndexOf(':') + 1).toUpperCase().replaceAll('-', '_')}`,
      status,
      type,
      title,
      ...(retryAfter === undefined ? {} : { retryAfter: Number(retryAfter) }),
    });
  }

  /** A recorded error (`storeErrors`), from the problem document it was recorded as: the same first time and on every replay. */
  static recorded(outcome: RecordedOutcome): IdempotencyGraphqlError {
    const { type, title, status, detail, ...members } = JSON.parse(outcome.body ?? '{}') as ProblemDetails & Record<string, unknown>;
    const code = typeof members.code === 'string' ? members.code : (STATUS_CODES[status] ?? 'Error').toUpperCase().replace(/\W+/g, '_');
    return new IdempotencyGraphqlError(detail, { ...members, code, status, type, title });
  }
}
