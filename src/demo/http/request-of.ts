import type { ExecutionContext } from '@nestjs/common';

/**
 * The HTTP request behind a route or a GraphQL resolver. A resolver's
 * arguments are `[root, args, context, info]`, and both GraphQL drivers put
 * the request in the context as `req`; reading it here keeps the guards
 * free of `@nestjs/graphql`, which the demo loads only to serve GraphQL.
 */
export function requestOf<Request>(context: ExecutionContext): Request {
  if (context.getType<string>() === 'graphql') return context.getArgByIndex<{ req: Request }>(2).req;
  return context.switchToHttp().getRequest<Request>();
}
