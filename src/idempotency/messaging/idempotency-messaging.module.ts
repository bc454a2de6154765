import { Module } from '@nestjs/common';
import { IdempotentMessageHandlers } from './idempotent-message.js';
import { IdempotentMessageInterceptor } from './idempotent-message.interceptor.js';

/**
 * `@Idempotent()` on message handlers (`@EventPattern()`,
 * `@MessagePattern()`), on any Nest transport: import it once, beside
 * `IdempotencyModule`, in the app (or the worker) whose controllers handle
 * messages. Without it, such a handler fails the boot.
 */
@Module({ providers: [IdempotentMessageHandlers, IdempotentMessageInterceptor] })
export class IdempotencyMessagingModule {}
