import { type CallHandler, type ExecutionContext, Injectable } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { catchError, map, type Observable, throwError } from 'rxjs';
import type { IdempotentRoute } from '../http/idempotent-route.js';
import { IdempotencyKeyMalformedException, IdempotencyKeyMissingException, IdempotencyProblem } from '../errors/idempotency.exceptions.js';
import { type RecordedOutcome, REPLAYED_HEADER } from '../outcome/recorded-outcome.js';
import { type CallKey, type GraphqlCall, graphqlCallOf, isOnlyField, KEY_ARGUMENT, keyOf } from './graphql-call.js';
import { IdempotencyGraphqlError } from './graphql-errors.js';
import { fieldValueOf, recordFieldValue } from './graphql-field-value.js';
import { noteFieldAnswer } from './graphql-replays.js';
import { IdempotentMutations } from './idempotent-mutations.js';
import { type Attempt, type IdempotentCallType, IdempotencyExtensions } from '../http/idempotency-extensions.js';
import { settling } from '../http/settling.js';
import { Abandonment } from '../flow/handler-run.js';

/** Fields the flow has taken, so that a second interceptor bound to the same resolver passes them through. */
const entered = new WeakSet<object>();

/**
 * The GraphQL side of `@Idempotent()`: a mutation field is claimed, run and
 * recorded by the same one-transaction flow as a route (GraphQL runs a
 * mutation's fields one after another, so each protected field is its own
 * record in its own transaction). This adapts it: the key from the
 * `idempotencyKey` argument or the header, the field's value as the
 * outcome, the module's problems as GraphQL errors, and replays noted for
 * `extensions.idempotency` and the `Idempotent-Replayed` header. It serves
 * the `graphql` calls of the interceptor `@Idempotent()` binds, once it
 * registered for them.
 */
@Injectable()
export class GraphqlMutationFlow implements IdempotentCallType {
  constructor(
    private readonly mutations: IdempotentMutations,
    private readonly adapterHost: HttpAdapterHost,
    extensions: IdempotencyExtensions,
  ) {
    extensions.registerCallType('graphql', this);
  }

  intercept(context: ExecutionContext, next: CallHandler, attempt: Attempt): Observable<unknown> {
    const route = this.mutations.of(context.getClass(), context.getHandler());
    if (!route) return next.handle();
    const call = graphqlCallOf(context);
    if (entered.has(call.info)) return next.handle();
    entered.add(call.info);
    const key = keyOf(call, route.headerName);
    if (key.key.kind === 'missing' && !route.required) return next.handle();
    // The field's value is recorded by the field's type, which the call knows.
    const field: IdempotentRoute = { ...route, capture: (value) => recordFieldValue(value, call.info.returnType, call.info.schema) };
    const abandonment = new Abandonment();
    const settled = settling(() => attempt(key.key, { route: field, request: call, response: undefined, next, abandonment }), () => abandonment.abandon());
    return settled.pipe(
      map(({ outcome, replayed }) => this.answer(call, route, outcome, replayed)),
      catchError((error: unknown) => throwError(() => (error instanceof IdempotencyProblem ? asGraphqlError(error, key, route) : error))),
    );
  }

  /** The field's value, or its recorded error; a replay is noted for the response. */
  private answer(call: GraphqlCall, route: IdempotentRoute, outcome: RecordedOutcome, replayed: boolean): unknown {
    noteFieldAnswer(call.context, call.info.path.key, replayed);
    // The response is this field's alone only when the operation selects nothing else.
    if (replayed && call.response && isOnlyField(call.info)) this.adapterHost.httpAdapter?.setHeader(call.response, REPLAYED_HEADER, 'true');
    if (outcome.status !== route.successStatus) throw IdempotencyGraphqlError.recorded(outcome);
    return fieldValueOf(outcome, call.info.returnType, call.info.schema);
  }
}

/** The problem as a GraphQL error; a missing or malformed key is described by what carried it. */
function asGraphqlError(problem: IdempotencyProblem, { key, source }: CallKey, route: IdempotentRoute): IdempotencyGraphqlError {
  if (problem instanceof IdempotencyKeyMissingException) {
    return IdempotencyGraphqlError.fromProblem(problem, `This mutation requires a key: an ${KEY_ARGUMENT} argument or an ${route.headerName} header.`);
  }
  if (problem instanceof IdempotencyKeyMalformedException && key.kind === 'malformed') {
    return IdempotencyGraphqlError.fromProblem(problem, `The ${source} is malformed: ${key.reason}. Send 1 to 255 visible ASCII characters.`);
  }
  return IdempotencyGraphqlError.fromProblem(problem);
}
