import { type CanActivate, type ExecutionContext, HttpException, HttpStatus, Inject, Injectable } from '@nestjs/common';
import type { AuthenticatedRequest } from '../auth/api-key.guard.js';
import { requestOf } from './request-of.js';

export const TENANT_RATE_LIMIT = Symbol('TENANT_RATE_LIMIT');

const WINDOW_MS = 60_000;

/**
 * At most `limit` requests per tenant per minute (a fixed window; 0 turns it
 * off), so that one tenant cannot flood `idempotency_records` with distinct
 * keys: its records stay under limit × minutes of retention. Runs after the
 * API-key guard, which names the tenant.
 */
@Injectable()
export class TenantRateLimitGuard implements CanActivate {
  private readonly windows = new Map<string, { startedAt: number; count: number }>();

  constructor(@Inject(TENANT_RATE_LIMIT) private readonly limit: number) {}

  canActivate(context: ExecutionContext): boolean {
    const tenant = requestOf<Partial<AuthenticatedRequest>>(context).tenant;
    if (!this.limit || tenant === undefined) return true;
    const now = Date.now();
    let window = this.windows.get(tenant);
    if (!window || now - window.startedAt >= WINDOW_MS) this.windows.set(tenant, (window = { startedAt: now, count: 0 }));
    if (++window.count <= this.limit) return true;
    const retryAfter = Math.ceil((window.startedAt + WINDOW_MS - now) / 1000);
    throw new HttpException(
      { message: `Tenant rate limit of ${this.limit} requests a minute reached`, headers: { 'Retry-After': String(retryAfter) } },
      HttpStatus.TOO_MANY_REQUESTS,
    );
  }
}
