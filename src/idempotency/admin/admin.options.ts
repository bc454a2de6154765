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
   * refuse: false answers 403 `admin-forbidden`, and what it throws is
   * answered as the app answers it (a 401 with `WWW-Authenticate: Basic`
   * lets a browser sign in).
   */
  guard: AdminGuardOption;
  /**
   * Required: the tenant scopes the request's caller may see and act on,
   * e.g. `(req) => req.user.isStaff ? 'all' : [tenantScope(req.user.tenantId)]`,
   * or `'all'` written out where everyone the guard lets in may see every
   * tenant. The module refuses to start without it, since a guard that means
   * "is signed in" would otherwise show every tenant to every user. A caller
   * limited to some scopes never sees the outbox, whose events carry no tenant.
   */
  scopes: 'all' | ((request: any) => AdminScopes | Promise<AdminScopes>);
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
 * The one place the admin's defaults live; a missing guard or `scopes`, or a
 * guard class that cannot be created (`create`: in the admin module's
 * injector), fails the boot with the fix.
 */
export async function resolveAdminOptions(options: IdempotencyAdminOptions, create: GuardFactory): Promise<ResolvedAdminOptions> {
  const canActivate = await appGuardOf(options?.guard, create);
  return {
    canActivate,
    scopes: scopesOf(options.scopes),
    actor: options.actor ?? actorOfUser,
    statementTimeout: positiveInteger(options, 'statementTimeout', 5_000),
    connections: positiveInteger(options, 'connections', 1),
  };
}

/** `scopes` as stated: no default, since the one that shows every tenant would be the wrong one for a guard that means "is signed in". */
function scopesOf(scopes: IdempotencyAdminOptions['scopes'] | undefined): ResolvedAdminOptions['scopes'] {
  if (scopes === 'all') return () => 'all';
  if (typeof scopes === 'function') return scopes;
  throw new IdempotencyConfigurationError(
    `IdempotencyAdminModule refuses to start without \`scopes\`${scopes === undefined ? '' : ` (got ${JSON.stringify(scopes)})`}: whoever its guard lets in would see every tenant's records. ` +
      "State which tenants a caller may see: a function of the request, e.g. scopes: (request) => (request.user.staff ? 'all' : [tenantScope(request.user.tenantId)]), " +
      "or scopes: 'all' where everyone the guard lets in may see every tenant.",
  );
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
