import { type CallHandler, type ExecutionContext, Injectable } from '@nestjs/common';
import { type Observable, throwError } from 'rxjs';
import { IdempotencyConfigurationError } from '../errors/idempotency.exceptions.js';

/**
 * How a feature module serves `@Idempotent()` in a context other than HTTP
 * (`IdempotencyMessagingModule` for `rpc`): the interceptor `@Idempotent()`
 * binds hands it the calls of that context.
 */
export interface IdempotentCallType {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown>;
}

/**
 * The extension point of the core for other contexts: the context types
 * served besides HTTP, by Nest's name for them (`context.getType()`). A
 * feature module's provider registers its type as it is built, before any
 * module's `onModuleInit()`, so the startup checks know what is served.
 */
@Injectable()
export class IdempotentCallTypes {
  private readonly served = new Map<string, IdempotentCallType>();

  register(type: string, callType: IdempotentCallType): void {
    this.served.set(type, callType);
  }

  of(type: string): IdempotentCallType | undefined {
    return this.served.get(type);
  }

  /** A call of `type`, to the module that serves it; refused where none does, rather than run unprotected. */
  intercept(type: 'rpc', context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const served = this.served.get(type);
    if (served) return served.intercept(context, next);
    return throwError(() => new IdempotencyConfigurationError(messagingMissing(context.getClass().name, context.getHandler().name)));
  }
}

/** Why `@Idempotent()` on a message handler cannot serve it: no module serves message handlers, and how to fix it. */
export function messagingMissing(controller: string, handler: string): string {
  return (
    `@Idempotent() on ${controller}.${handler}, a message handler: import IdempotencyMessagingModule from 'nest-idempotency/messaging' ` +
    'beside IdempotencyModule, which serves @Idempotent() on @EventPattern() and @MessagePattern() handlers.'
  );
}
