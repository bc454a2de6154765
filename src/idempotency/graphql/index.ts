/**
 * Idempotent GraphQL mutations (`nest-idempotency/graphql`):
 * `IdempotencyGraphqlModule` serves `@Idempotent()` on `@Mutation()`
 * resolvers; the errors it answers with, and the plugin and hooks that put
 * `extensions.idempotency` on responses. It loads no GraphQL package: it
 * reads what `@nestjs/graphql` hands the resolver. An app that imports only
 * the core entry point loads none of it.
 *
 * @module nest-idempotency/graphql
 */
export { IdempotencyGraphqlModule } from './idempotency-graphql.module.js';
export { IdempotencyGraphqlError, type IdempotencyGraphqlErrorExtensions } from './graphql-errors.js';
export { idempotencyExtensionOf, type IdempotencyResponseExtension } from './graphql-replays.js';
export { idempotencyApolloPlugin, idempotencyMercuriusHooks, type IdempotencyApolloPlugin, type IdempotencyMercuriusHooks } from './graphql-plugins.js';
