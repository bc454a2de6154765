import { type CanActivate, type ExecutionContext, Inject, Injectable, SetMetadata, UnauthorizedException } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { requestOf } from '../http/request-of.js';

export const API_KEYS = Symbol('API_KEYS');
const PUBLIC_ROUTE = 'auth:public';

/** Lets a route through without an API key. */
export const Public = () => SetMetadata(PUBLIC_ROUTE, true);

/** The request property the guard fills with the caller's tenant. */
export interface AuthenticatedRequest {
  tenant: string;
}

/** The tenant IdempotencyModule scopes keys by: the one the guard found for the request's API key. */
export const tenantOfRequest = (request: Partial<AuthenticatedRequest>): string | undefined => request.tenant;

/** `Authorization: Bearer <api key>` names the tenant; a missing or unknown key gets 401. */
@Injectable()
export class ApiKeyGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    @Inject(API_KEYS) private readonly apiKeys: ReadonlyMap<string, string>,
  ) {}

  canActivate(context: ExecutionContext): boolean {
    if (this.reflector.getAllAndOverride<boolean>(PUBLIC_ROUTE, [context.getHandler(), context.getClass()])) return true;
    const request = requestOf<{ headers: Record<string, string | undefined> } & Partial<AuthenticatedRequest>>(context);
    const match = /^Bearer\s+(\S+)$/i.exec(request.headers.authorization ?? '');
    const tenant = match ? this.apiKeys.get(match[1]) : undefined;
    if (!tenant) throw new UnauthorizedException('Send Authorization: Bearer <api key>');
    request.tenant = tenant;
    return true;
  }
}
