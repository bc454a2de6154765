import { type DynamicModule, type ExecutionContext, HttpException, HttpStatus, Injectable } from '@nestjs/common';
import { ThrottlerGuard, type ThrottlerLimitDetail, ThrottlerModule } from '@nestjs/throttler';
import type { AuthenticatedRequest } from '../auth/api-key.guard.js';
import { requestOf } from './request-of.js';
import { SharedRateLimitStorage } from './shared-rate-limit.storage.js';

const WINDOW_MS = 60_000;

/** The demo's per-tenant rate limit. */
export interface TenantRateLimitOptions {
  /** Requests per tenant per minute. */
  limit: number;
  /** Where instances share their counts; unset, or while it is out, each instance counts in memory on its own. */
  redisUrl?: string;
}

/**
 * At most `limit` requests per tenant per minute, whatever the route, so that
 * one tenant cannot flood `idempotency_records` with distinct keys: its records
 * stay under limit × minutes of retention. Runs after the API-key guard, which
 * names the tenant; a request it let through without one (a public route) is
 * not counted. Refused requests get 429 with `Retry-After`, over HTTP and
 * GraphQL alike, through the exception rather than the response.
 */
@Injectable()
export class TenantRateLimitGuard extends ThrottlerGuard {
  /** Nest's throttler settings for the guard, with the counts in Redis when `redisUrl` is set, failing open to this instance's (see SharedRateLimitStorage). */
  static module({ limit, redisUrl }: TenantRateLimitOptions): DynamicModule {
    return ThrottlerModule.forRootAsync({
      useFactory: () => ({
        throttlers: [{ ttl: WINDOW_MS, limit }],
        // The exception carries Retry-After (see throwThrottlingException), so no response object is needed.
        setHeaders: false,
        storage: redisUrl ? new SharedRateLimitStorage(redisUrl) : undefined,
      }),
    });
  }

  protected override async shouldSkip(context: ExecutionContext): Promise<boolean> {
    return requestOf<Partial<AuthenticatedRequest>>(context).tenant === undefined;
  }

  protected override getRequestResponse(context: ExecutionContext): { req: Record<string, any>; res: Record<string, any> } {
    return { req: requestOf(context), res: {} };
  }

  protected override async getTracker(request: Partial<AuthenticatedRequest>): Promise<string> {
    return request.tenant!;
  }

  /** One count per tenant across routes (the default key is per route). */
  protected override generateKey(_context: ExecutionContext, tenant: string, throttler: string): string {
    return `tenant-rate-limit:${throttler}:${tenant}`;
  }

  protected override async throwThrottlingException(_context: ExecutionContext, { limit, timeToBlockExpire }: ThrottlerLimitDetail): Promise<void> {
    throw new HttpException(
      { message: `Tenant rate limit of ${limit} requests a minute reached`, headers: { 'Retry-After': String(Math.max(1, timeToBlockExpire)) } },
      HttpStatus.TOO_MANY_REQUESTS,
    );
  }
}
