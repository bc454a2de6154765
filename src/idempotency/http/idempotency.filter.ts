import { type ArgumentsHost, Catch, type ExceptionFilter } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { IdempotencyProblem } from '../errors/idempotency.exceptions.js';
import { applyOutcomeHeaders, RecordedOutcomeResponse } from '../outcome/recorded-outcome.js';

/**
 * Writes the module's own answers: problem documents, and recorded outcomes
 * whose status is not the route's (recorded errors). Bound per route by
 * `@Idempotent()`, so the application's other errors are left alone.
 */
@Catch(IdempotencyProblem, RecordedOutcomeResponse)
export class IdempotencyFilter implements ExceptionFilter {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  catch(exception: IdempotencyProblem | RecordedOutcomeResponse, host: ArgumentsHost): void {
    const adapter = this.adapterHost.httpAdapter;
    const response = host.switchToHttp().getResponse();
    if (exception instanceof RecordedOutcomeResponse) {
      applyOutcomeHeaders(adapter, response, exception.outcome, exception.replayed);
      adapter.reply(response, exception.outcome.body ?? undefined, exception.outcome.status);
      return;
    }
    for (const [name, value] of Object.entries(exception.headers)) adapter.setHeader(response, name, value);
    adapter.setHeader(response, 'Content-Type', 'application/problem+json');
    adapter.reply(response, JSON.stringify(exception.problem), exception.problem.status);
  }
}
