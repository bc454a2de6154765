import { Controller, Get, Header, Query, Req, type Type, UseFilters, UseGuards } from '@nestjs/common';
import { AdminGuard } from './admin.guard.js';
import { AdminPageFilter } from './admin-page.filter.js';
import { AdminCallers, outboxQueryOf, type Params, recordIdOf, recordQueryOf, unfinishedQueryOf } from './admin-request.js';
import { IdempotencyAdmin } from './idempotency-admin.js';
import { ADMIN_SCRIPT, ADMIN_STYLES } from './page/page-assets.js';
import { outboxPage, unfinishedPage } from './page/lists.page.js';
import type { PageContext } from './page/page-layout.js';
import { recordPage, recordsPage } from './page/records.page.js';

/** Nothing but the page's own script and styles, never framed, never cached. */
const PAGE_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/**
 * The admin's HTML page at `<path>`: the record search, one record, the
 * unfinished operations and the outbox's dead letters and pending events,
 * rendered on the server, so that it reads without JavaScript. The actions'
 * forms post to the JSON API through the page's small script.
 */
export function adminPageController(path: string, decorators: ClassDecorator[]): Type {
  @Controller(path)
  @UseGuards(AdminGuard)
  @UseFilters(AdminPageFilter)
  class IdempotencyAdminPageController {
    constructor(
      readonly admin: IdempotencyAdmin,
      readonly callers: AdminCallers,
    ) {}

    @Get()
    @Header('Content-Type', 'text/html; charset=utf-8')
    @Header('Content-Security-Policy', PAGE_POLICY)
    @Header('Cache-Control', 'no-store')
    async records(@Req() request: unknown, @Query() params: Params) {
      const context = await this.context(request, '');
      const asked = recordQueryOf(params);
      // A release lands here, on the released key's records (none): `released` says so on the page.
      return recordsPage(context, asked, await this.admin.findRecords(asked, context.caller), params.released === 'true').text;
    }

    @Get('record')
    @Header('Content-Type', 'text/html; charset=utf-8')
    @Header('Content-Security-Policy', PAGE_POLICY)
    @Header('Cache-Control', 'no-store')
    async record(@Req() request: unknown, @Query() params: Params) {
      const context = await this.context(request, '/record');
      return recordPage(context, await this.admin.record(recordIdOf(params), context.caller)).text;
    }

    @Get('unfinished')
    @Header('Content-Type', 'text/html; charset=utf-8')
    @Header('Content-Security-Policy', PAGE_POLICY)
    @Header('Cache-Control', 'no-store')
    async unfinished(@Req() request: unknown, @Query() params: Params) {
      const context = await this.context(request, '/unfinished');
      const asked = unfinishedQueryOf(params);
      return unfinishedPage(context, asked, await this.admin.unfinished(asked, context.caller)).text;
    }

    @Get('outbox')
    @Header('Content-Type', 'text/html; charset=utf-8')
    @Header('Content-Security-Policy', PAGE_POLICY)
    @Header('Cache-Control', 'no-store')
    async outbox(@Req() request: unknown, @Query() params: Params) {
      const context = await this.context(request, '/outbox');
      const asked = outboxQueryOf(params);
      return outboxPage(context, asked, await this.admin.outboxEvents(asked, context.caller)).text;
    }

    @Get('assets/admin.js')
    @Header('Content-Type', 'text/javascript; charset=utf-8')
    @Header('Cache-Control', 'no-cache')
    script() {
      return ADMIN_SCRIPT;
    }

    @Get('assets/admin.css')
    @Header('Content-Type', 'text/css; charset=utf-8')
    @Header('Cache-Control', 'no-cache')
    styles() {
      return ADMIN_STYLES;
    }

    /** The admin's base path as this request reached it (a global prefix included), and its caller. */
    private async context(request: unknown, suffix: string): Promise<PageContext> {
      return { base: basePathOf(request, suffix), caller: await this.callers.of(request) };
    }
  }
  for (const decorate of decorators) decorate(IdempotencyAdminPageController);
  return IdempotencyAdminPageController;
}

/** The request's path without the route's own suffix: Express keeps it as `originalUrl`, Fastify as `url`. */
export function basePathOf(request: unknown, suffix: string): string {
  const { originalUrl, url } = request as { originalUrl?: string; url?: string };
  const path = (originalUrl ?? url ?? '/').split('?')[0].replace(/\/+$/, '');
  return suffix && path.endsWith(suffix) ? path.slice(0, -suffix.length) : path;
}
