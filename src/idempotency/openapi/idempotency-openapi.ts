import type { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { IdempotencyProblemType } from '../errors/idempotency.exceptions.js';
import type { IdempotentRoutes } from '../http/idempotent-route.js';
import { MAX_KEY_LENGTH } from '../http/idempotency-key.js';
import { REPLAYED_HEADER } from '../outcome/recorded-outcome.js';


const PROBLEM_SCHEMA = {
  type: 'object',
  required: ['type', 'title', 'status', 'detail'],
  properties: {
    type: { type: 'string', format: 'uri', description: 'A stable problem type URI' },
    title: { type: 'string' },
    status: { type: 'integer' },
    detail: { type: 'string' },
  },
};

const PROBLEMS: Array<[number, string, string[]]> = [
  [400, 'The idempotency key is missing or malformed, or the request has no canonical form', [IdempotencyProblemType.KeyMissing, IdempotencyProblemType.KeyMalformed, IdempotencyProblemType.RequestNotCanonical]],
  [409, 'A request with this key is still in flight: retry after Retry-After seconds', [IdempotencyProblemType.RequestInProgress]],
  [422, 'The key was already used for a different request', [IdempotencyProblemType.KeyReused]],
];

/** A misconfigured route is left to the startup validator, which reports it with the app's other checks. */
function documentable(routes: IdempotentRoutes, controller: Function, handler: Function) {
  try {
    return routes.of(controller, handler);
  } catch {
    return undefined;
  }
}

/** The prototype that defines a handler: the controller's, or a base controller's it inherits from. */
function ownerOf(prototype: object, name: string): { owner: object; descriptor: PropertyDescriptor } {
  for (let owner = prototype; ; owner = Object.getPrototypeOf(owner)) {
    const descriptor = Object.getOwnPropertyDescriptor(owner, name);
    if (descriptor) return { owner, descriptor };
  }
}

/** Handlers already documented: several apps in one process share their metadata. */
const documented = new WeakSet<Function>();

/**
 * Documents every `@Idempotent()` route (a handler's own, or one its
 * class's `@Idempotent()` covers) through @nestjs/swagger: the key header,
 * the 400/409/422 problem responses and the `Idempotent-Replayed` header of
 * the success response. Loaded only where the app has @nestjs/swagger (see
 * `documentRoutes`).
 */
export function documentIdempotentRoutes(swagger: typeof import('@nestjs/swagger'), discovery: DiscoveryService, scanner: MetadataScanner, routes: IdempotentRoutes): void {
  for (const wrapper of discovery.getControllers()) {
    const controller = wrapper.metatype as Function | null;
    if (!controller?.prototype) continue;
    for (const name of scanner.getAllMethodNames(controller.prototype)) {
      const { owner, descriptor } = ownerOf(controller.prototype, name);
      const route = documentable(routes, controller, descriptor.value);
      if (!route || documented.has(descriptor.value)) continue;
      documented.add(descriptor.value);
      const decorate = (decorator: MethodDecorator) => decorator(owner, name, descriptor);
      decorate(
        swagger.ApiHeader({
          name: route.headerName,
          required: route.required,
          description: `Names one logical operation: retries with the same key and request replay the first outcome for ${Math.round(route.retention / 3_600_000)} h. 1 to ${MAX_KEY_LENGTH} visible ASCII characters, bare or as an RFC 8941 quoted string.`,
          schema: { type: 'string', minLength: 1, maxLength: MAX_KEY_LENGTH + 2, pattern: '^[\\x21-\\x7E]+$' },
        }),
      );
      decorate(
        swagger.ApiResponse({
          status: route.successStatus,
          description: 'The outcome, first or replayed',
          headers: { [REPLAYED_HEADER]: { description: 'Present, and `true`, on a replay of a recorded outcome', schema: { type: 'string', enum: ['true'] } } },
        }),
      );
      for (const [status, description, types] of PROBLEMS) {
        decorate(
          swagger.ApiResponse({
            status,
            description: `${description} (${types.join(', ')})`,
            content: { 'application/problem+json': { schema: PROBLEM_SCHEMA } },
            ...(status === 409 ? { headers: { 'Retry-After': { description: 'Seconds to wait before retrying', schema: { type: 'integer' } } } } : {}),
          }),
        );
      }
    }
  }
}
