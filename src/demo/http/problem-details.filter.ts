import { type ArgumentsHost, Catch, type ExceptionFilter, HttpException, HttpStatus, Logger } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { STATUS_CODES } from 'node:http';

/**
 * Renders every error of the demo as RFC 9457 `application/problem+json`
 * (type `about:blank`, as RFC 9457 says for errors that need no type of
 * their own): validation errors, 401, 404, 413, 415, 429 and 5xx alike. The
 * idempotency module's own errors keep their own filter and types.
 */
@Catch()
export class ProblemDetailsFilter implements ExceptionFilter {
  private readonly logger = new Logger('Problems');

  constructor(private readonly adapterHost: HttpAdapterHost) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    // A resolver's error goes back to GraphQL, which answers it in `errors`: a filter that returns nothing leaves it there.
    if (host.getType<string>() === 'graphql') return;
    const status = exception instanceof HttpException ? exception.getStatus() : HttpStatus.INTERNAL_SERVER_ERROR;
    if (status >= 500) this.logger.error(exception instanceof Error ? (exception.stack ?? exception.message) : String(exception));
    const adapter = this.adapterHost.httpAdapter;
    const response = host.switchToHttp().getResponse();
    const problem = { type: 'about:blank', title: STATUS_CODES[status] ?? 'Error', status, detail: detailOf(exception, status) };
    if (exception instanceof HttpException) {
      const headers = (exception.getResponse() as { headers?: Record<string, string> }).headers ?? {};
      for (const [name, value] of Object.entries(headers)) adapter.setHeader(response, name, value);
    }
    adapter.setHeader(response, 'Content-Type', 'application/problem+json');
    adapter.reply(response, JSON.stringify(problem), status);
  }
}

/** What went wrong, for the client; a 5xx never leaks its internals. */
function detailOf(exception: unknown, status: number): string {
  if (status >= 500 || !(exception instanceof HttpException)) return 'The server could not complete the request.';
  const body = exception.getResponse();
  if (typeof body === 'string') return body;
  const message = (body as { message?: string | string[] }).message;
  return Array.isArray(message) ? message.join('; ') : (message ?? exception.message);
}
