import type { ApolloDriverConfig } from '@nestjs/apollo';
import { type DynamicModule, Module } from '@nestjs/common';
import { GraphQLModule } from '@nestjs/graphql';
import type { MercuriusDriverConfig } from '@nestjs/mercurius';
import { idempotencyApolloPlugin, IdempotencyGraphqlModule, idempotencyMercuriusHooks } from '../../idempotency/graphql/index.js';
import type { HttpAdapterName } from '../http/http-setup.js';
import { OrdersModule } from '../orders/orders.module.js';
import { OrdersResolver } from './orders.resolver.js';

/** The demo's GraphQL endpoint. */
@Module({})
export class DemoGraphqlModule {
  /**
   * `/graphql`, code-first: Apollo on Express, Mercurius on Fastify, each
   * with the module's hook that adds `extensions.idempotency` to responses.
   * The driver is loaded here, so that an app without GraphQL never loads one.
   */
  static async forAdapter(adapter: HttpAdapterName): Promise<DynamicModule> {
    const shared = { autoSchemaFile: true, sortSchema: true, path: '/graphql' } as const;
    const graphql =
      adapter === 'fastify'
        ? GraphQLModule.forRoot<MercuriusDriverConfig>({ ...shared, driver: (await import('@nestjs/mercurius')).MercuriusDriver, graphiql: true, hooks: idempotencyMercuriusHooks() })
        : GraphQLModule.forRoot<ApolloDriverConfig>({
            ...shared,
            driver: (await import('@nestjs/apollo')).ApolloDriver,
            plugins: [idempotencyApolloPlugin()],
            includeStacktraceInErrorResponses: false,
          });
    return { module: DemoGraphqlModule, imports: [graphql, IdempotencyGraphqlModule, OrdersModule], providers: [OrdersResolver] };
  }
}
