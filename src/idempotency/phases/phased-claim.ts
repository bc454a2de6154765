import { createParamDecorator, type ExecutionContext, type Type } from '@nestjs/common';
import { IdempotencyConfigurationError } from '../errors/idempotency.exceptions.js';
import type { PhasedOperation } from './phased-operation.js';

export const PHASED_CLAIM = Symbol('idempotency:phased-claim');

/**
 * The claim of one request to an `@Idempotent({ phases: true })` route,
 * committed with a lease before the handler runs. The handler runs its
 * operation under it and returns what `run` resolves to.
 *
 * @example
 * @Post(':id/payments')
 * @Idempotent({ phases: true })
 * pay(@Body() dto: PaymentDto, @PhasedClaim() claim: PhasedClaim) {
 *   return claim.run(CapturePayment, { ...dto });
 * }
 */
export interface PhasedClaim {
  /**
   * Runs the operation under this request's claim. `input` (JSON) is stored
   * with the claim, so the reaper can finish the operation if no client retries.
   */
  run<I, O>(operation: Type<PhasedOperation<I, O>>, input: I): Promise<O>;
}

/** Injects the request's `PhasedClaim` into a handler of an `@Idempotent({ phases: true })` route. */
export const PhasedClaim = createParamDecorator((_: unknown, context: ExecutionContext): PhasedClaim => {
  const claim = context.switchToHttp().getRequest()[PHASED_CLAIM];
  if (!claim) throw new IdempotencyConfigurationError('@PhasedClaim() is only available on routes with @Idempotent({ phases: true }).');
  return claim;
});
