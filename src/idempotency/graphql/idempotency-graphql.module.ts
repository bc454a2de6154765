import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { GraphqlMutationFlow } from './graphql-mutation.flow.js';
import { IdempotentMutations } from './idempotent-mutations.js';
import { IdempotentMutationsValidator } from './idempotent-mutations.validator.js';

/**
 * `@Idempotent()` on `@Mutation()` resolvers, on either GraphQL driver:
 * import it once, beside `IdempotencyModule`. Without it, an
 * `@Idempotent()` resolver fails the boot.
 */
@Module({
  imports: [DiscoveryModule],
  providers: [IdempotentMutations, IdempotentMutationsValidator, GraphqlMutationFlow],
})
export class IdempotencyGraphqlModule {}
