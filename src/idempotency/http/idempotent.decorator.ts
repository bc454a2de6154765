import { applyDecorators, SetMetadata, UseFilters, UseInterceptors } from '@nestjs/common';
import { IdempotencyFilter } from './idempotency.filter.js';
import { IdempotencyInterceptor } from './idempotency.interceptor.js';
import type { IdempotentMessageOptions, IdempotentOptions } from '../options/idempotency.options.js';
import { IDEMPOTENT_ROUTE, SKIP_IDEMPOTENCY } from '../options/idempotency.tokens.js';
import { IdempotentMessageFilter } from './idempotent-message.filter.js';
import { trackHandlerCalls } from './tracked-handlers.js';

/**
 * Makes a route idempotent: retries with the same `Idempotency-Key` run the
 * handler once and replay its outcome. The handler's writes through
 * `IdempotencyTransactionHost` share one transaction with the claim and the outcome.
 * On a GraphQL `@Mutation()` resolver, the same for the mutation field, with
 * the key from its `idempotencyKey` argument or the header; it is refused on
 * queries, subscriptions and field resolvers.
 *
 * On a controller it covers the class's POST, PUT, PATCH and DELETE handlers
 * (not GET, HEAD, OPTIONS or `@All()`), with its options as their defaults: a
 * handler's own `@Idempotent(options)` overrides them option by option, and
 * `@SkipIdempotency()` leaves a handler out. `operation` and `phases` name one
 * handler's work, so they are refused on a class. On a resolver class it
 * covers the class's mutations, likewise.
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
 *
 * @example
 * @Idempotent({ version: '2' })
 * @Controller('carts')
 * export class CartsController {
 *   @Post() create() {}                                      // covered
 *   @Put(':id') @Idempotent({ required: false }) replace() {} // version '2', key optional
 *   @Post('preview') @SkipIdempotency() preview() {}        // not covered
 *   @Get(':id') find() {}                                    // not covered
 * }
 */
export function Idempotent(options: IdempotentOptions & IdempotentMessageOptions = {}): ClassDecorator & MethodDecorator {
  // One interceptor for routes, mutations and message handlers (`rpc`); each filter passes the other's errors through.
  // The handler is wrapped first, so that the metadata applied next lands on what Nest will call.
  return applyDecorators(
    trackHandlerCalls as ClassDecorator & MethodDecorator,
    SetMetadata(IDEMPOTENT_ROUTE, options),
    UseInterceptors(IdempotencyInterceptor),
    UseFilters(IdempotencyFilter, IdempotentMessageFilter),
  );
}

/**
 * Leaves one handler out of its controller's class-level `@Idempotent()`:
 * it runs unprotected, as if the class had no `@Idempotent()`.
 *
 * @example
 * @Post('preview')
 * @SkipIdempotency()
 * preview(@Body() cart: CartDto) { return this.pricing.quote(cart); }
 */
export function SkipIdempotency(): MethodDecorator {
  return SetMetadata(SKIP_IDEMPOTENCY, true);
}
