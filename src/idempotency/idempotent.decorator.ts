import { applyDecorators, SetMetadata, UseFilters, UseInterceptors } from '@nestjs/common';
import { IdempotencyFilter } from './idempotency.filter.js';
import { IdempotencyInterceptor } from './idempotency.interceptor.js';
import type { IdempotentOptions } from './idempotency.options.js';
import { IDEMPOTENT_ROUTE } from './idempotency.tokens.js';



/**
 * Makes a route idempotent: retries with the same `Idempotency-Key` run the
 * handler once and replay its outcome. The handler's writes through
 * `TransactionHost` share one transaction with the claim and the outcome.
 *
 * @example
 * @Post()
 * @Idempotent({ storeErrors: [402] })
 * create(@Body() dto: CreateOrderDto) { return this.orders.create(dto); }
 */
export function Idempotent(options: IdempotentOptions = {}): MethodDecorator {
  return applyDecorators(
    SetMetadata(IDEMPOTENT_ROUTE, options),
    UseInterceptors(IdempotencyInterceptor),
    UseFilters(IdempotencyFilter),
  );
}
