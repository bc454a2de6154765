import { Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { IdempotentRoutes, type IdempotentRoute } from '../idempotent-route.js';
import { IdempotencyConfigurationError } from '../idempotency.exceptions.js';
import type { IdempotentOptions } from '../idempotency.options.js';
import { IDEMPOTENT_ROUTE } from '../idempotency.tokens.js';
import { type FingerprintFields, fingerprintFieldsOf } from '../request-fingerprint.js';
import { argumentsOf, type GraphqlCall, RESOLVER_NAME_METADATA, RESOLVER_TYPE_METADATA } from './graphql-call.js';

/** The resolver type `@Mutation()` sets; `@Query()` sets `Query`, `@ResolveField()` its parent type's name. */
const MUTATION = 'Mutation';

/**
 * Reads `@Idempotent()` on resolver methods once per method. A mutation
 * field is a route of its own: the operation `graphql Mutation.<field>`,
 * a fingerprint of its arguments, status 200 for a success. Retention,
 * wait, scope, version and `storeErrors` are worked out as for HTTP routes.
 */
@Injectable()
export class IdempotentMutations {
  private readonly mutations = new Map<Function, IdempotentRoute | null>();

  constructor(
    private readonly reflector: Reflector,
    private readonly routes: IdempotentRoutes,
  ) {}

  /**
   * The mutation's settings, or undefined where the method is not
   * `@Idempotent()`. Throws for an `@Idempotent()` query, subscription or
   * field resolver: only mutations are protected.
   */
  of(resolver: Function, handler: Function): IdempotentRoute | undefined {
    let mutation = this.mutations.get(handler);
    if (mutation === undefined) {
      const options = this.reflector.get<IdempotentOptions | undefined>(IDEMPOTENT_ROUTE, handler);
      mutation = options ? this.build(options, resolver, handler) : null;
      this.mutations.set(handler, mutation);
    }
    return mutation ?? undefined;
  }

  private build(options: IdempotentOptions, resolver: Function, handler: Function): IdempotentRoute {
    const where = `@Idempotent() on ${resolver.name}.${handler.name}`;
    const type: unknown = Reflect.getMetadata(RESOLVER_TYPE_METADATA, handler);
    if (type !== MUTATION) {
      const what = type === 'Query' ? 'a query' : type === 'Subscription' ? 'a subscription' : 'a field resolver';
      throw new IdempotencyConfigurationError(
        `${where}: it is ${what}, and only mutations are protected: a read has nothing to run once. Remove @Idempotent(), or make it a @Mutation().`,
      );
    }
    if (options.phases) {
      throw new IdempotencyConfigurationError(`${where}: phased operations run on HTTP routes only; a mutation field runs in one transaction. Remove phases, or serve the operation on a route.`);
    }
    const route = this.routes.of(resolver, handler)!;
    const fieldsOf = argumentFields(options.fingerprint);
    const field: string = Reflect.getMetadata(RESOLVER_NAME_METADATA, handler) ?? handler.name;
    return {
      ...route,
      operation: options.operation ?? `graphql ${MUTATION}.${field}`,
      successStatus: 200,
      replayHeaders: [],
      scopeOf: (call) => route.scopeOf((call as GraphqlCall).request),
      fingerprintFieldsOf: (call) => fieldsOf(argumentsOf(call as GraphqlCall)),
    };
  }
}

/**
 * What a mutation's fingerprint covers: its arguments without the key; or,
 * with `fingerprint`, paths into them (`['input.sku']`), paths to leave out
 * (`{ exclude: ['input.sentAt'] }`), or a function of them.
 */
function argumentFields(spec: FingerprintFields | undefined): (args: Record<string, unknown>) => unknown {
  if (spec === undefined) return (args) => args;
  if (typeof spec === 'function' || !('exclude' in spec)) return fingerprintFieldsOf(spec);
  // The HTTP default fields hold the body under `body`: the arguments take its place.
  const withoutExcluded = fingerprintFieldsOf({ exclude: spec.exclude.map((path) => `body.${path}`) });
  return (args) => (withoutExcluded({ body: args }) as { body: unknown }).body;
}
