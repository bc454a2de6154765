import { type CanActivate, type ExecutionContext, ForbiddenException, Inject, Injectable, UnsupportedMediaTypeException } from '@nestjs/common';
import type { Observable } from 'rxjs';
import type { ResolvedAdminOptions } from './admin.options.js';
import { RESOLVED_ADMIN_OPTIONS } from './admin.tokens.js';

type HttpRequest = { method?: string; headers: Record<string, string | string[] | undefined> };

/**
 * The admin's own gate, before the app's guard: an action must come as JSON
 * from the page's own origin. A browser signed in with Basic credentials
 * sends them with any request to the origin, so a form on another site
 * could otherwise post an action; a cross-site JSON request needs a CORS
 * preflight the app does not grant. Clients other than browsers send
 * neither `Origin` nor `Sec-Fetch-Site`, and pass.
 */
@Injectable()
export class AdminGuard implements CanActivate {
  constructor(@Inject(RESOLVED_ADMIN_OPTIONS) private readonly options: ResolvedAdminOptions) {}

  canActivate(context: ExecutionContext): boolean | Promise<boolean> | Observable<boolean> {
    const request = context.switchToHttp().getRequest<HttpRequest>();
    if (request.method !== 'GET' && request.method !== 'HEAD') refuseCrossSite(request);
    return this.options.canActivate(context);
  }
}

function refuseCrossSite({ headers }: HttpRequest): void {
  const site = header(headers, 'sec-fetch-site');
  const origin = header(headers, 'origin');
  const host = header(headers, 'x-forwarded-host') ?? header(headers, 'host');
  const crossSite = site !== undefined ? site !== 'same-origin' && site !== 'none' : origin !== undefined && hostOf(origin) !== host;
  if (crossSite) throw new ForbiddenException('Admin actions are accepted from the admin page\'s own origin only.');
  if (!/^application\/json\b/i.test(header(headers, 'content-type') ?? '')) throw new UnsupportedMediaTypeException('Send admin actions as application/json.');
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
