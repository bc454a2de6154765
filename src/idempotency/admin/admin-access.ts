import { AdminProblemType, AdminRefusedException } from './admin.exceptions.js';
import type { AdminCaller } from './admin.types.js';

/**
 * The scope of a tenant's keys, as `IdempotencyModule` writes it: for the
 * `scopes` option of the admin module, e.g. `scopes: (req) => req.user.tenants.map((t) => tenantScope(t))`.
 * Without a tenant, `anonymous`: the one scope of `tenant: 'shared'`. A route with `version`
 * writes `tenantScope(tenant, version)`: list those scopes too where a caller
 * should see them.
 */
export function tenantScope(tenant?: string | null, version?: string): string {
  const scope = tenant === undefined || tenant === null ? 'anonymous' : `tenant:${encodeURIComponent(tenant)}`;
  return version === undefined ? scope : `${scope} version:${encodeURIComponent(version)}`;
}

/** Refuses a scope the caller may not see. */
export function assertVisible(caller: AdminCaller, scope: string): void {
  if (caller.scopes === 'all' || caller.scopes.includes(scope)) return;
  throw new AdminRefusedException(AdminProblemType.ScopeForbidden, `${JSON.stringify(caller.actor)} may not see the scope ${JSON.stringify(scope)}.`);
}

/** Refuses the outbox to a caller limited to some scopes: its events carry none. */
export function assertSeesAll(caller: AdminCaller): void {
  if (caller.scopes === 'all') return;
  throw new AdminRefusedException(
    AdminProblemType.ScopeForbidden,
    `Outbox events carry no tenant scope, so only a caller who may see every scope lists or requeues them; ${JSON.stringify(caller.actor)} may see ${caller.scopes.length} scope(s).`,
  );
}

/** The scopes a list may read: the one asked for (if the caller may see it), else the caller's, or every one (undefined). */
export function scopesFor(caller: AdminCaller, asked: string | undefined): readonly string[] | undefined {
  if (asked) {
    assertVisible(caller, asked);
    return [asked];
  }
  return caller.scopes === 'all' ? undefined : caller.scopes;
}
