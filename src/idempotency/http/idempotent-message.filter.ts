import { type ArgumentsHost, Catch, type RpcExceptionFilter } from '@nestjs/common';
import { type Observable, throwError } from 'rxjs';
import { IdempotentMessageError } from '../errors/idempotency.exceptions.js';

/**
 * Hands the message flow's own errors to the transport as they are, so it
 * can tell a message to terminate (`redeliver: false`) from one to redeliver
 * later; Nest's default RPC handling would flatten them into
 * `{ status: 'error' }`. Bound by `@Idempotent()`.
 */
@Catch(IdempotentMessageError)
export class IdempotentMessageFilter implements RpcExceptionFilter<IdempotentMessageError> {
  catch(exception: IdempotentMessageError, _host: ArgumentsHost): Observable<never> {
    return throwError(() => exception);
  }
}
