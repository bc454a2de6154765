import { createParamDecorator, type ExecutionContext, type Type } from '@nestjs/common';
import { IdempotencyConfigurationError } from '../idempotency.exceptions.js';
import type { PhasedOperationHandler } from './phased-operation.js';

export const PHASED_EXECUTION = Symbol('idempotency:phased-execution');

/**
 * The claim of one phased request, handed to its handler by `@Phased()`.
 *
 * @example
 * @Post(':id/payments')
 * @Idempotent({ phases: true })
 * pay(@Body() dto: PaymentDto, @Phased() execution: PhasedExecution) {
 *   return execution.run(CapturePayment, { ...dto });
 * }
 */
export class PhasedExecution {
  constructor(private readonly start: <I, O>(operation: Type<PhasedOperationHandler<I, O>>, input: I) => Promise<O>) {}

  /**
   * Runs the operation under this request's claim. `input` (JSON) is stored
   * with the claim, so the reaper can finish the operation if no client retries.
   */
  run<I, O>(operation: Type<PhasedOperationHandler<I, O>>, input: I): Promise<O> {
    return this.start(operation, input);
  }
}

/** Injects the request's `PhasedExecution` into a handler of an `@Idempotent({ phases: true })` route. */
export const Phased = createParamDecorator((_: unknown, context: ExecutionContext): PhasedExecution => {
  const execution = context.switchToHttp().getRequest()[PHASED_EXECUTION];
  if (!execution) throw new IdempotencyConfigurationError('@Phased() is only available on routes with @Idempotent({ phases: true }).');
  return execution;
});
