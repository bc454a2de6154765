import { Body, Controller, Get, Header, HttpCode, Post, Query, Req, type Type, UseFilters, UseGuards } from '@nestjs/common';
import { IdempotencyFilter } from '../http/idempotency.filter.js';
import { AdminGuard } from './admin.guard.js';
import { AdminCallers, eventIdsOf, forceOf, outboxQueryOf, type Params, reasonOf, recordIdOf, recordQueryOf, unfinishedQueryOf } from './admin-request.js';
import { IdempotencyAdmin } from './idempotency-admin.js';

/**
 * The admin's JSON API at `<path>/api`, as a class of its own for each
 * `forRoot()` (a controller's path is fixed when its class is decorated).
 * Reads are GETs with query parameters (scope, operation and key may hold
 * any character, so they are never path segments); actions are POSTs of a
 * JSON body with a `reason` (and, for a release, `force`). Refusals are
 * problem details.
 */
export function adminApiController(path: string, decorators: ClassDecorator[]): Type {
  @Controller(`${path}/api`)
  @UseGuards(AdminGuard)
  @UseFilters(IdempotencyFilter)
  class IdempotencyAdminApiController {
    constructor(
      readonly admin: IdempotencyAdmin,
      readonly callers: AdminCallers,
    ) {}

    @Get('records')
    @Header('Cache-Control', 'no-store')
    async records(@Req() request: unknown, @Query() query: Params) {
      return this.admin.findRecords(recordQueryOf(query), await this.callers.of(request));
    }

    @Get('record')
    @Header('Cache-Control', 'no-store')
    async record(@Req() request: unknown, @Query() query: Params) {
      return this.admin.record(recordIdOf(query), await this.callers.of(request));
    }

    @Get('unfinished')
    @Header('Cache-Control', 'no-store')
    async unfinished(@Req() request: unknown, @Query() query: Params) {
      return this.admin.unfinished(unfinishedQueryOf(query), await this.callers.of(request));
    }

    @Get('outbox')
    @Header('Cache-Control', 'no-store')
    async outbox(@Req() request: unknown, @Query() query: Params) {
      return this.admin.outboxEvents(outboxQueryOf(query), await this.callers.of(request));
    }

    @Post('release')
    @HttpCode(200)
    async release(@Req() request: unknown, @Body() body: Params) {
      return this.admin.release(recordIdOf(body ?? {}), await this.callers.of(request), reasonOf(body ?? {}), { force: forceOf(body ?? {}) });
    }

    @Post('fail')
    @HttpCode(200)
    async fail(@Req() request: unknown, @Body() body: Params) {
      return this.admin.markFailed(recordIdOf(body ?? {}), await this.callers.of(request), reasonOf(body ?? {}));
    }

    @Post('requeue')
    @HttpCode(200)
    async requeue(@Req() request: unknown, @Body() body: Params) {
      return this.admin.requeueDead(eventIdsOf(body ?? {}), await this.callers.of(request), reasonOf(body ?? {}));
    }
  }
  for (const decorate of decorators) decorate(IdempotencyAdminApiController);
  return IdempotencyAdminApiController;
}
