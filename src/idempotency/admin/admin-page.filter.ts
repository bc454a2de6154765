import { type ArgumentsHost, Catch, type ExceptionFilter } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { IdempotencyProblem } from '../errors/idempotency.exceptions.js';
import { html } from './page/html.js';

/** The page's own routes, stripped from a request's path to find the admin's base. */
const PAGE_SUFFIX = /\/(record|unfinished|outbox)$/;

/**
 * A refusal on the page (a scope the caller may not see, a record that is
 * not there, a filter that does not parse) as a page with its status: the
 * problem's title and detail, and the way back to the search.
 */
@Catch(IdempotencyProblem)
export class AdminPageFilter implements ExceptionFilter {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  catch(exception: IdempotencyProblem, host: ArgumentsHost): void {
    const adapter = this.adapterHost.httpAdapter;
    const request = host.switchToHttp().getRequest<{ originalUrl?: string; url?: string }>();
    const base = (request.originalUrl ?? request.url ?? '').split('?')[0].replace(/\/+$/, '').replace(PAGE_SUFFIX, '');
    const { title, detail, status, type } = exception.problem;
    const page = html`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${title}</title><link rel="stylesheet" href="${base}/assets/admin.css"></head>
<body><main><h1>${status} ${title}</h1><p>${detail}</p><p class="note"><code>${type}</code></p><p><a href="${base}">Back to the records</a></p></main></body></html>`;
    const response = host.switchToHttp().getResponse();
    adapter.setHeader(response, 'Content-Type', 'text/html; charset=utf-8');
    adapter.setHeader(response, 'Cache-Control', 'no-store');
    adapter.reply(response, page.text, status);
  }
}
