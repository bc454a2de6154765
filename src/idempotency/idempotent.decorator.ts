import { applyDecorators, SetMetadata, UseFilters, UseInterceptors } from '@nestjs/common';
import { IdempotencyFilter } from './idempotency.filter.js';
import { IdempotencyInterceptor } from './idempotency.interceptor.js';
import type { IdempotentOptions } from './idempotency.options.js';
import type { IdempotentMessageOptions } from './messaging/idempotent-message.js';
import { IdempotentMessageFilter } from './messaging/idempotent-message.filter.js';
import { IdempotentMessageInterceptor } from './messaging/idempotent-message.interceptor.js';
import { IDEMPOTENT_ROUTE } from './idempotency.tokens.js';



/**
 * Makes a route idempotent: retries with the same `Idempotency-Key` run the
 * handler once and replay its outcome. The handler's writes through
 * `TransactionHost` share one transaction with the claim and the outcome.
 *
 * On a message handler (`@EventPattern()`, `@MessagePattern()`), the
 * message's key (by default its `Operation-Id` or `Nats-Msg-Id` header) is
 * claimed in the same way, and a redelivered message whose record is
 * complete is acknowledged without running the handler again.
 *
 * @example
 * @Post()
 * @Idempotent({ storeErrors: [402] })
 * create(@Body() dto: CreateOrderDto) { return this.orders.create(dto); }
 *
 * @EventPattern('events.order.created')
 * @Idempotent({ messageTenant: (event: OrderCreated) => event.tenant })
 * ship(@Payload() event: OrderCreated) { return this.shipments.create(event); }
 */
export function Idempotent(options: IdempotentOptions & IdempotentMessageOptions = {}): MethodDecorator {
  // Each interceptor passes the other context through untouched: HTTP routes, then message handlers (`rpc`).
  return applyDecorators(
    SetMetadata(IDEMPOTENT_ROUTE, options),
    UseInterceptors(IdempotencyInterceptor, IdempotentMessageInterceptor),
    UseFilters(IdempotencyFilter, IdempotentMessageFilter),
  );
}
