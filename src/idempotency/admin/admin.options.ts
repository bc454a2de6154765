import type { ExecutionContext } from '@nestjs/common';
import type { Observable } from 'rxjs';
import { IdempotencyConfigurationError } from '../errors/idempotency.exceptions.js';
import { type AdminGuardOption, appGuardOf, type GuardFactory } from './admin-app-guard.js';

export type { AdminGuardOption } from './admin-app-guard.js';

/** The scopes a caller may see: `'all'`, or a list built with `tenantScope()`. */
export type AdminScopes = 'all' | readonly string[];

/** Options of `IdempotencyAdminModule.forRoot()` / `forRootAsync()`. */
export interface IdempotencyAdminOptions {
  /**
   * Required: who may use the admin's API and page. The module refuses to
   * start without one. It runs after the app's global guards, so it may
   * read what they set (`request.user`), and throws or answers false to
   * refuse (a 401 with `WWW-Authenticate: Basic` lets a browser sign in).
   */
  guard: AdminGuardOption;
  /**
   * The tenant scopes the request's caller may see and act on, e.g.
   * `(req) => req.user.isStaff ? 'all' : [tenantScope(req.user.tenantId)]`.
   * A caller limited to some scopes never sees the outbox, whose events carry
   * no tenant. Default `'all'`: whoever the guard lets in sees everything.
   */
  scopes?: (request: any) => AdminScopes | Promise<AdminScopes>;
  /**
   * Who is asking, named in every action's event and log line. Default: the
   * first of `request.user`'s `username`, `email`, `name`, `sub` and `id`.
   * Actions are refused when it names nobody.
   */
  actor?: (request: any) => string | undefined;
  /**
   * How long one of the admin's statements may run, in milliseconds, before
   * PostgreSQL cancels it (`SET LOCAL statement_timeout`) and the request
   * gets 503 `admin-timeout`; a statement waiting for one of the admin's
   * `connections` waits as long at most (then 503 `admin-busy`). Default 5000.
   */
  statementTimeout?: number;
  /**
   * How many of the app's pool connections the admin's statements hold at
   * once, at most; the rest wait their turn in the admin's own queue. The
   * module refuses to start unless it leaves the app at least one of its
   * pool's. Default 1.
   */
  connections?: number;
}

/** The options as the module runs with them: every default applied. */
export interface ResolvedAdminOptions {
  canActivate(context: ExecutionContext): boolean | Promise<boolean> | Observable<boolean>;
  scopes(request: unknown): AdminScopes | Promise<AdminScopes>;
  actor(request: unknown): string | undefined;
  statementTimeout: number;
  connections: number;
}

/**
 * The one place the admin's defaults live; a missing guard, or a guard class
 * that cannot be created (`create`: in the admin module's injector), fails
 * the boot with the fix.
 */
export async function resolveAdminOptions(options: IdempotencyAdminOptions, create: GuardFactory): Promise<ResolvedAdminOptions> {
  const canActivate = await appGuardOf(options?.guard, create);
  return {
    canActivate,
    scopes: options.scopes ?? (() => 'all'),
    actor: options.actor ?? actorOfUser,
    statementTimeout: positiveInteger(options, 'statementTimeout', 5_000),
    connections: positiveInteger(options, 'connections', 1),
  };
}

function positiveInteger(options: IdempotencyAdminOptions, name: 'statementTimeout' | 'connections', fallback: number): number {
  const value = options[name] ?? fallback;
  if (Number.isSafeInteger(value) && value >= 1) return value;
  throw new IdempotencyConfigurationError(`IdempotencyAdminModule: \`${name}\` must be a positive integer, got ${JSON.stringify(value)}; leave it out for its default, ${fallback}.`);
}

function actorOfUser(request: unknown): string | undefined {
  const user = (request as { user?: Record<string, unknown> } | undefined)?.user;
  for (const field of ['username', 'email', 'name', 'sub', 'id']) {
    const value = user?.[field];
    if (typeof value === 'string' || typeof value === 'number') return String(value);
  }
  return undefined;
}
