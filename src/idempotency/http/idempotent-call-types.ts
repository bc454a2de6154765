import { type CallHandler, type ExecutionContext, Injectable } from '@nestjs/common';
import { type Observable, throwError } from 'rxjs';
import { IdempotencyConfigurationError } from '../errors/idempotency.exceptions.js';
import type { Settled } from '../outcome/recorded-outcome.js';
import type { ParsedIdempotencyKey } from './idempotency-key.js';
import type { RouteCall } from './route-fields.js';

/** The core's attempt for one call: the cache, the fast read, the route's flow, the attempt event; settles on what it answers. */
export type Attempt = (key: ParsedIdempotencyKey, call: RouteCall) => Settled | Promise<Settled>;

/**
 * How a feature module serves `@Idempotent()` in a context other than HTTP
 * (`IdempotencyMessagingModule` for `rpc`, `IdempotencyGraphqlModule` for
 * `graphql`): the interceptor `@Idempotent()` binds hands it the calls of
 * that context, with the core's `attempt` for a call it maps onto a route.
 */
export interface IdempotentCallType {
  intercept(context: ExecutionContext, next: CallHandler, attempt: Attempt): Observable<unknown>;
}

/** The context types feature modules serve, and the module that serves each. */
export type ServedType = 'rpc' | 'graphql';

/** What to import for each type, where `@Idempotent()` meets a handler of that type and nothing serves it. */
const SERVED_BY: Record<ServedType, { what: string; module: string; entry: string; serves: string }> = {
  rpc: { what: 'a message handler', module: 'IdempotencyMessagingModule', entry: 'nest-idempotency/messaging', serves: '@Idempotent() on @EventPattern() and @MessagePattern() handlers' },
  graphql: { what: 'a GraphQL resolver', module: 'IdempotencyGraphqlModule', entry: 'nest-idempotency/graphql', serves: '@Idempotent() on @Mutation() resolvers' },
};

/**
 * The extension point of the core for other contexts: the context types
 * served besides HTTP, by Nest's name for them (`context.getType()`). A
 * feature module's provider registers its type as it is built, before any
 * module's `onModuleInit()`, so the startup checks know what is served.
 */
@Injectable()
export class IdempotentCallTypes {
  private readonly served = new Map<string, IdempotentCallType>();

  register(type: ServedType, callType: IdempotentCallType): void {
    this.served.set(type, callType);
  }

  of(type: ServedType): IdempotentCallType | undefined {
    return this.served.get(type);
  }

  /** A call of `type`, to the module that serves it; refused where none does, rather than run unprotected. */
  intercept(type: ServedType, context: ExecutionContext, next: CallHandler, attempt: Attempt): Observable<unknown> {
    const served = this.served.get(type);
    if (served) return served.intercept(context, next, attempt);
    return throwError(() => new IdempotencyConfigurationError(unservedMessage(type, context.getClass().name, context.getHandler().name)));
  }
}

/** Why `@Idempotent()` on a handler of `type` cannot serve it: no module serves that type, and how to fix it. */
export function unservedMessage(type: ServedType, owner: string, handler: string): string {
  const { what, module, entry, serves } = SERVED_BY[type];
  return `@Idempotent() on ${owner}.${handler}, ${what}: import ${module} from '${entry}' beside IdempotencyModule, which serves ${serves}.`;
}
