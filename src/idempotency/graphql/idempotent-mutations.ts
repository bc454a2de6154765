import { Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { type HandlerKind, type IdempotentRoutes, type IdempotentRoute } from '../http/idempotent-route.js';
import { IdempotencyFacade } from '../http/idempotency.facade.js';
import { IdempotencyConfigurationError } from '../errors/idempotency.exceptions.js';
import { type IdempotentOptions, mergeRouteOptions } from '../options/idempotency.options.js';
import { IDEMPOTENT_ROUTE } from '../options/idempotency.tokens.js';
import { type FingerprintFields, fingerprintFieldsOf } from '../fingerprint/request-fingerprint.js';
import { argumentsOf, type GraphqlCall, MUTATION, mutationOperationOf, RESOLVER_NAME_METADATA, RESOLVER_TYPE_METADATA } from './graphql-call.js';

/**
 * Works out `@Idempotent()` on resolver methods once per method, from the
 * method's own decorator merged over its class's, as for routes; a
 * class-level one alone covers the class's mutations. A mutation field is
 * a route of its own (its operation `graphql Mutation.<field>`, retention,
 * wait, scope, version, `storeErrors` and `storeIf` are worked out as for
 * routes), with a fingerprint of its arguments and 200 for a success.
 */
@Injectable()
export class IdempotentMutations {
  private readonly mutations = new Map<Function, Map<Function, IdempotentRoute | null>>();

  private readonly routes: IdempotentRoutes;

  constructor(
    private readonly reflector: Reflector,
    idempotency: IdempotencyFacade,
  ) {
    this.routes = idempotency.routes;
  }

  /**
   * The mutation's settings, or undefined where `@Idempotent()` does not
   * cover the method. Throws for an `@Idempotent()` query, subscription or
   * field resolver: only mutations are protected.
   */
  of(resolver: Function, handler: Function): IdempotentRoute | undefined {
    let handlers = this.mutations.get(resolver);
    if (!handlers) this.mutations.set(resolver, (handlers = new Map()));
    let mutation = handlers.get(handler);
    if (mutation === undefined) {
      const route = this.routes.of(resolver, handler, kindOf(handler));
      mutation = route ? this.build(route, resolver, handler) : null;
      handlers.set(handler, mutation);
    }
    return mutation ?? undefined;
  }

  private build(route: IdempotentRoute, resolver: Function, handler: Function): IdempotentRoute {
    const where = `@Idempotent() on ${resolver.name}.${handler.name}`;
    const type: unknown = Reflect.getMetadata(RESOLVER_TYPE_METADATA, handler);
    if (type !== MUTATION) {
      const what = type === 'Query' ? 'a query' : type === 'Subscription' ? 'a subscription' : 'a field resolver';
      throw new IdempotencyConfigurationError(
        `${where}: it is ${what}, and only mutations are protected: a read has nothing to run once. Remove @Idempotent(), or make it a @Mutation().`,
      );
    }
    if (route.lease !== undefined) {
      throw new IdempotencyConfigurationError(`${where}: phased operations run on HTTP routes only; a mutation field runs in one transaction. Remove phases, or serve the operation on a route.`);
    }
    const own = this.reflector.get<IdempotentOptions | undefined>(IDEMPOTENT_ROUTE, handler);
    const inherited = this.reflector.get<IdempotentOptions | undefined>(IDEMPOTENT_ROUTE, resolver);
    const options = own && inherited ? mergeRouteOptions(inherited, own) : (own ?? inherited ?? {});
    const fieldsOf = argumentFields(options.fingerprint);
    return {
      ...route,
      successStatus: 200,
      replayHeaders: [],
      scopeOf: (call) => route.scopeOf((call as GraphqlCall).request),
      fingerprintFieldsOf: (call) => fieldsOf(argumentsOf(call as GraphqlCall)),
      fieldsAreData: typeof options.fingerprint !== 'function',
      readsBody: false,
    };
  }
}

/** A resolver method as a route: a class-level `@Idempotent()` covers mutations, and each is the operation `graphql Mutation.<field>`. */
function kindOf(handler: Function): HandlerKind {
  const type: unknown = Reflect.getMetadata(RESOLVER_TYPE_METADATA, handler);
  const operation = mutationOperationOf(handler) ?? `graphql ${String(type ?? 'field')}.${Reflect.getMetadata(RESOLVER_NAME_METADATA, handler) ?? handler.name}`;
  return { coveredByClass: type === MUTATION, operation };
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
