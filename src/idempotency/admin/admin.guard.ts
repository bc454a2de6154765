import { type CanActivate, type ExecutionContext, Inject, Injectable } from '@nestjs/common';
import { isObservable, lastValueFrom } from 'rxjs';
import { AdminProblemType, AdminRefusedException } from './admin.exceptions.js';
import type { ResolvedAdminOptions } from './admin.options.js';
import { RESOLVED_ADMIN_OPTIONS } from './admin.tokens.js';

type HttpRequest = { method?: string; headers: Record<string, string | string[] | undefined> };

/**
 * The admin's own gate, before the app's guard: an action must come as JSON
 * from the page's own origin. A browser signed in with Basic credentials
 * sends them with any request to the origin, so a form on another site
 * could otherwise post an action; a cross-site JSON request needs a CORS
 * preflight the app does not grant. Clients other than browsers send
 * neither `Origin` nor `Sec-Fetch-Site`, and pass. Then the app's guard: its
 * "no" is the admin's problem document (`admin-forbidden`), as every other
 * refusal of the admin's, rather than Nest's plain 403; what it throws is
 * its own, answered as the app answers it.
 */
@Injectable()
export class AdminGuard implements CanActivate {
  constructor(@Inject(RESOLVED_ADMIN_OPTIONS) private readonly options: ResolvedAdminOptions) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const request = context.switchToHttp().getRequest<HttpRequest>();
    if (request.method !== 'GET' && request.method !== 'HEAD') refuseCrossSite(request);
    const decision = this.options.canActivate(context);
    if (await (isObservable(decision) ? lastValueFrom(decision, { defaultValue: false }) : decision)) return true;
    throw new AdminRefusedException(AdminProblemType.Forbidden, 'The admin\'s guard does not let this request in: sign in as an operator.');
  }
}

function refuseCrossSite({ headers }: HttpRequest): void {
  const site = header(headers, 'sec-fetch-site');
  const origin = header(headers, 'origin');
  const host = header(headers, 'x-forwarded-host') ?? header(headers, 'host');
  const crossSite = site !== undefined ? site !== 'same-origin' && site !== 'none' : origin !== undefined && hostOf(origin) !== host;
  if (crossSite) throw new AdminRefusedException(AdminProblemType.CrossSite, 'Admin actions are accepted from the admin page\'s own origin only.');
  if (!/^application\/json\b/i.test(header(headers, 'content-type') ?? '')) throw new AdminRefusedException(AdminProblemType.NotJson, 'Send admin actions as application/json.');
}

function header(headers: HttpRequest['headers'], name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function hostOf(origin: string): string | undefined {
  try {
    return new URL(origin).host;
  } catch {
    return undefined;
  }
}
