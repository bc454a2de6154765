import { fingerprintedFields, type IdempotentRoute } from './idempotent-route.js';
import { bodyStateOf, bodyValueOf, readUnreadBody, refuseHiddenBody } from './request-body.js';

/**
 * The fields a call of `route` is fingerprinted by: at once, or once an
 * HTTP body no parser has read yet is read (see request-body.ts). A GraphQL
 * field (no `response`) has its arguments parsed already.
 */
export function routeFieldsOf(route: IdempotentRoute, request: any, response: unknown): unknown | Promise<unknown> {
  const body = response !== undefined && route.readsBody ? bodyStateOf(request) : 'parsed';
  if (body === 'hidden') refuseHiddenBody(route.operation);
  if (body !== 'unread') return fingerprintedFields(route, request);
  return readUnreadBody(request, route.maxBodyBytes)
    .then((bytes) => bodyValueOf(bytes, request.headers))
    .then((body) => fingerprintedFields(route, request, { body }));
}
