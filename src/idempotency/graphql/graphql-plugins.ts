import { idempotencyExtensionOf } from './graphql-replays.js';

/** The parts of an Apollo Server 4/5 response the plugin touches. */
interface ApolloResponseContext {
  contextValue: unknown;
  response: { body: { kind: string; singleResult?: { extensions?: Record<string, unknown> } } };
}

/** An Apollo Server plugin, as `ApolloServerPlugin` declares it (the module does not load `@apollo/server`). */
export interface IdempotencyApolloPlugin {
  /** Apollo's hook per request. */
  requestDidStart(): Promise<{
    /** Adds the replay signals of the request's mutations to the response's `extensions`. */
    willSendResponse(context: ApolloResponseContext): Promise<void>;
  }>;
}

/**
 * An Apollo Server plugin that adds `extensions.idempotency` to responses in
 * which a protected mutation field answered (see `IdempotencyResponseExtension`).
 *
 * @example
 * GraphQLModule.forRoot<ApolloDriverConfig>({ driver: ApolloDriver, autoSchemaFile: true, plugins: [idempotencyApolloPlugin()] })
 */
export function idempotencyApolloPlugin(): IdempotencyApolloPlugin {
  return {
    async requestDidStart() {
      return {
        async willSendResponse({ contextValue, response }) {
          const extension = idempotencyExtensionOf(contextValue);
          const result = response.body.kind === 'single' ? response.body.singleResult : undefined;
          if (extension && result) result.extensions = { ...result.extensions, idempotency: extension };
        },
      };
    },
  };
}

/** Mercurius hooks, as `@nestjs/mercurius`'s `hooks` option takes them. */
export interface IdempotencyMercuriusHooks {
  /** Mercurius's hook after execution: adds the replay signals to the result's `extensions`. */
  onResolution(execution: { extensions?: Record<string, unknown> }, context: unknown): Promise<void>;
}

/**
 * Mercurius hooks that add `extensions.idempotency` to responses in which a
 * protected mutation field answered (see `IdempotencyResponseExtension`).
 *
 * @example
 * GraphQLModule.forRoot<MercuriusDriverConfig>({ driver: MercuriusDriver, autoSchemaFile: true, hooks: idempotencyMercuriusHooks() })
 */
export function idempotencyMercuriusHooks(): IdempotencyMercuriusHooks {
  return {
    async onResolution(execution, context) {
      const extension = idempotencyExtensionOf(context);
      if (extension) execution.extensions = { ...execution.extensions, idempotency: extension };
    },
  };
}
