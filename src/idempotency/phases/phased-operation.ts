import { Injectable, SetMetadata } from '@nestjs/common';
import { IdempotencyConfigurationError } from '../errors/idempotency.exceptions.js';
import type { Phases } from './phases.js';

export const PHASED_OPERATION = 'idempotency:phased-operation';

/**
 * An operation with external side effects, run in named phases that each
 * commit on their own. `run` must be deterministic given its input and the
 * results of its phases: on a retry, or when the reaper finishes an abandoned
 * claim, it runs again from the top, and finished phases return their stored
 * results instead of running again.
 */
export interface PhasedOperation<TInput, TOutput> {
  /** Runs the operation, its phases through `phases`; on a resume, finished phases return their stored results. */
  run(input: TInput, phases: Phases): Promise<TOutput>;
  /**
   * The answer of a finished run: its body and headers (e.g. `Location`),
   * with the route's success status. Whoever finishes the operation (the
   * request, a retry or the reaper's completer) records this same answer, so
   * it must depend on `output` only. Default: `output` as the JSON body.
   * Headers are recorded when `replayHeaders` lists them.
   *
   * @example
   * respond(payment: PaymentView) {
   *   return { body: payment, headers: { Location: `/payments/${payment.id}` } };
   * }
   */
  respond?(output: TOutput): OperationResponse;
}

/** What a finished phased operation answers. */
export interface OperationResponse {
  /** Sent as JSON, or as is when a string; none when undefined or null. */
  body?: unknown;
  headers?: Record<string, string>;
}

/**
 * Registers a provider as a phased operation under a stable name, which is
 * stored with each claim so the reaper can resume it.
 *
 * @example
 * @PhasedOperation('capture-payment')
 * export class CapturePayment implements PhasedOperation<PaymentInput, PaymentView> { ... }
 */
export const PhasedOperation = (name: string): ClassDecorator => (target) => {
  Injectable()(target);
  SetMetadata(PHASED_OPERATION, name)(target);
};

/** The name an operation class was registered under. */
export function operationName(operation: Function): string {
  const name: string | undefined = Reflect.getMetadata(PHASED_OPERATION, operation);
  if (!name) throw new IdempotencyConfigurationError(`${operation.name} is not decorated with @PhasedOperation(name).`);
  return name;
}
