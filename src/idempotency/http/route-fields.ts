import type { CallHandler } from '@nestjs/common';
import type { Abandonment } from '../flow/handler-run.js';
import { fingerprintedFields, type IdempotentRoute } from './idempotent-route.js';
import type { ReadBody } from '../fingerprint/request-fingerprint.js';
import { bodyStateOf, bytesBodyOf, readUnreadBody, refuseFilesParsedOutside, refuseHiddenBody } from './request-body.js';

/** One call of a route as the dispatcher hands it on: an HTTP request (with its response) or a GraphQL field (without). */
export interface RouteCall {
  route: IdempotentRoute;
  request: any;
  response: unknown;
  next: CallHandler;
  abandonment?: Abandonment;
}

/** The fields a call is fingerprinted by, and how the module read its body, where it read it. */
export interface RouteFields {
  fields: unknown;
  bodyReadAs?: ReadBody['readAs'];
}

/**
 * The fields a call of `route` is fingerprinted by: at once, or once an
 * HTTP body no parser has read yet is read, or one a parser left as bytes
 * is hashed (see request-body.ts), or once
 * the promise a fingerprint function returned settles. A GraphQL field (no
 * `response`) has its arguments parsed already.
 */
export function routeFieldsOf(route: IdempotentRoute, request: any, response: unknown): RouteFields | Promise<RouteFields> {
  const body = response !== undefined && route.readsBody ? bodyStateOf(request) : 'parsed';
  if (body === 'hidden') refuseHiddenBody(route.operation);
  if (body === 'files') refuseFilesParsedOutside(route.operation);
  if (body === 'unread' || body === 'bytes') {
    const read = body === 'unread' ? readUnreadBody(request, route.maxBodyBytes) : bytesBodyOf(request);
    return read.then((bytes) => ({ fields: fingerprintedFields(route, request, bytes), bodyReadAs: bytes.readAs }));
  }
  const fields = fingerprintedFields(route, request);
  return isThenable(fields) ? Promise.resolve(fields).then((settled) => ({ fields: settled })) : { fields };
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === 'function';
}
