import { type CallHandler, type ExecutionContext, Injectable } from '@nestjs/common';
import { type Observable, throwError } from 'rxjs';
import { IdempotencyConfigurationError } from '../errors/idempotency.exceptions.js';
import type { RequestFingerprint } from '../fingerprint/request-fingerprints.js';
import type { FlowEnding, Settled } from '../outcome/recorded-outcome.js';
import type { RecordId } from '../records/stored-record.js';
import type { ParsedIdempotencyKey } from './idempotency-key.js';
import type { IdempotentRoute } from './idempotent-route.js';
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

/** A request of a phased route (`phases: true`), as the dispatcher hands it to the flow that serves such routes. */
export interface PhasedRequest {
  route: IdempotentRoute;
  next: CallHandler;
  request: Record<symbol, unknown>;
  response: unknown;
}

/** The flow of phased routes (`IdempotencyPhasesModule`): claims under a lease, runs the phases, records. */
export interface PhasedRouteFlow {
  execute(id: RecordId, fingerprint: RequestFingerprint, request: PhasedRequest): Promise<FlowEnding>;
}

/** What a feature module serves: the context types besides HTTP, by Nest's name for them, and phased routes. */
export type Served = 'rpc' | 'graphql' | 'phases';

/** What to import for each, where `@Idempotent()` meets a handler that needs it and nothing serves it. */
const SERVED_BY: Record<Served, { what: string; module: string; serves: string }> = {
  rpc: { what: 'a message handler', module: 'IdempotencyMessagingModule', serves: '@Idempotent() on @EventPattern() and @MessagePattern() handlers' },
  graphql: { what: 'a GraphQL resolver', module: 'IdempotencyGraphqlModule', serves: '@Idempotent() on @Mutation() resolvers' },
  phases: { what: 'a phased route', module: 'IdempotencyPhasesModule', serves: '@Idempotent({ phases: true }) routes and finishes their abandoned claims' },
};

/**
 * The extension points of the core, where the feature modules plug in: how
 * each context type besides HTTP is served, and the flow of phased routes.
 * A feature module's provider registers as it is built, before any
 * module's `onModuleInit()`, so the startup checks know what is served.
 */
@Injectable()
export class IdempotencyExtensions {
  private readonly callTypes = new Map<string, IdempotentCallType>();
  private phased?: PhasedRouteFlow;

  registerCallType(type: 'rpc' | 'graphql', callType: IdempotentCallType): void {
    this.callTypes.set(type, callType);
  }

  registerPhasedFlow(flow: PhasedRouteFlow): void {
    this.phased = flow;
  }

  serves(what: Served): boolean {
    return what === 'phases' ? this.phased !== undefined : this.callTypes.has(what);
  }

  /** A call of `type`, to the module that serves it; refused where none does, rather than run unprotected. */
  intercept(type: 'rpc' | 'graphql', context: ExecutionContext, next: CallHandler, attempt: Attempt): Observable<unknown> {
    const served = this.callTypes.get(type);
    if (served) return served.intercept(context, next, attempt);
    return throwError(() => new IdempotencyConfigurationError(unservedMessage(type, `${context.getClass().name}.${context.getHandler().name}`)));
  }

  /** A request of a phased route, to the flow that serves them; refused where none does. */
  executePhased(id: RecordId, fingerprint: RequestFingerprint, request: PhasedRequest): Promise<FlowEnding> {
    if (this.phased) return this.phased.execute(id, fingerprint, request);
    return Promise.reject(new IdempotencyConfigurationError(unservedMessage('phases', request.route.operation)));
  }
}

/** Why `@Idempotent()` on a handler (`where`: its class and method, or its operation) cannot serve it, and how to fix it. */
export function unservedMessage(what: Served, where: string): string {
  const served = SERVED_BY[what];
  return `@Idempotent() on ${where}, ${served.what}: import ${served.module} from 'nest-idempotency/${what === 'rpc' ? 'messaging' : what}' beside IdempotencyModule, which serves ${served.serves}.`;
}
