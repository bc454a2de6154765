import { createHash } from 'node:crypto';
import { type CanActivate, type ExecutionContext, UnauthorizedException } from '@nestjs/common';
import { type AdminScopes, IdempotencyAdminModule, tenantScope } from '../../idempotency/admin/index.js';
import { Public } from './api-key.guard.js';

/** The demo's default operators' keys, documented in docs/demo.md: one sees every tenant, one acme's only. */
export const DEFAULT_ADMIN_API_KEYS = 'demo-admin-key:*,demo-acme-admin-key:acme';

/** Where the demo serves the admin page, and its API under `/api`. */
export const ADMIN_PATH = 'admin/idempotency';

/** What an admin key grants: the tenants it sees (`*` for all). */
interface Operator {
  scopes: AdminScopes;
  /** A prefix of the key's SHA-256, to tell keys apart in the audit log without writing the key. */
  keyHash: string;
}

/** The request properties the admin guard fills. */
interface OperatorRequest {
  headers: Record<string, string | undefined>;
  operator?: Operator & { name: string };
}

/** Parses `ADMIN_API_KEYS="key:*,key:tenant|tenant"` into a key → operator map. */
export function parseAdminKeys(spec: string): ReadonlyMap<string, Operator> {
  const keys = new Map<string, Operator>();
  for (const entry of spec.split(',').map((part) => part.trim()).filter(Boolean)) {
    const separator = entry.lastIndexOf(':');
    if (separator <= 0 || separator === entry.length - 1) throw new Error(`ADMIN_API_KEYS entry "${entry}" is not of the form key:* or key:tenant|tenant`);
    const key = entry.slice(0, separator);
    const tenants = entry.slice(separator + 1);
    keys.set(key, { scopes: tenants === '*' ? 'all' : tenants.split('|').map((tenant) => tenantScope(tenant)), keyHash: createHash('sha256').update(key).digest('hex').slice(0, 8) });
  }
  return keys;
}

/**
 * The demo's admin role: an admin key, as `Authorization: Bearer <key>` or
 * as the password of HTTP Basic (so that a browser signs in; the user name
 * names the operator in the audit log). A missing or unknown key gets 401
 * with the Basic challenge.
 */
class AdminKeyGuard implements CanActivate {
  constructor(private readonly keys: ReadonlyMap<string, Operator>) {}

  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<OperatorRequest>();
    const { name, key } = credentialsOf(request.headers.authorization ?? '');
    const operator = key === undefined ? undefined : this.keys.get(key);
    if (!operator) {
      throw new UnauthorizedException({ message: 'Send an admin key: Authorization: Bearer <admin key>, or sign in with it as the password', headers: { 'WWW-Authenticate': 'Basic realm="idempotency admin", charset="UTF-8"' } });
    }
    request.operator = { ...operator, name: name || 'operator' };
    return true;
  }
}

function credentialsOf(authorization: string): { name?: string; key?: string } {
  const bearer = /^Bearer\s+(\S+)$/i.exec(authorization);
  if (bearer) return { key: bearer[1] };
  const basic = /^Basic\s+(\S+)$/i.exec(authorization);
  if (!basic) return {};
  const decoded = Buffer.from(basic[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? {} : { name: decoded.slice(0, colon), key: decoded.slice(colon + 1) };
}

/**
 * The library's admin module as the demo serves it, at `/admin/idempotency`:
 * public to the API-key guard (tenant keys do not open it), behind the admin
 * keys instead.
 */
export function demoAdminModule(spec: string) {
  return IdempotencyAdminModule.forRoot({
    path: ADMIN_PATH,
    decorators: [Public()],
    guard: new AdminKeyGuard(parseAdminKeys(spec)),
    scopes: (request: OperatorRequest) => request.operator!.scopes,
    actor: (request: OperatorRequest) => `${request.operator!.name} (admin key #${request.operator!.keyHash})`,
  });
}
