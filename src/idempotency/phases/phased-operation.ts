import { Injectable, SetMetadata, type Type } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import { IdempotencyConfigurationError } from '../idempotency.exceptions.js';
import type { OperationPhases } from './operation-phases.js';

const PHASED_OPERATION = 'idempotency:phased-operation';

/**
 * An operation with external side effects, run in named phases that each
 * commit on their own. `run` must be deterministic given its input and the
 * results of its phases: on a retry, or when the reaper finishes an abandoned
 * claim, it runs again from the top, and finished phases return their stored
 * results instead of running again.
 */
export interface PhasedOperationHandler<TInput, TOutput> {
  run(input: TInput, phases: OperationPhases): Promise<TOutput>;
}

/**
 * Registers a provider as a phased operation under a stable name, which is
 * stored with each claim so the reaper can resume it.
 *
 * @example
 * @PhasedOperation('capture-payment')
 * export class CapturePayment implements PhasedOperationHandler<PaymentInput, PaymentView> { ... }
 */
export const PhasedOperation = (name: string): ClassDecorator => (target) => {
  Injectable()(target);
  SetMetadata(PHASED_OPERATION, name)(target);
};

export function phasedOperationName(operation: Function): string {
  const name: string | undefined = Reflect.getMetadata(PHASED_OPERATION, operation);
  if (!name) throw new IdempotencyConfigurationError(`${operation.name} is not decorated with @PhasedOperation(name).`);
  return name;
}

/** Every `@PhasedOperation()` provider of the app, by name. */
@Injectable()
export class PhasedOperations {
  private byName?: Map<string, PhasedOperationHandler<unknown, unknown>>;

  constructor(private readonly discovery: DiscoveryService) {}

  get(name: string): PhasedOperationHandler<unknown, unknown> | undefined {
    this.byName ??= this.discover();
    return this.byName.get(name);
  }

  instanceOf<I, O>(operation: Type<PhasedOperationHandler<I, O>>): PhasedOperationHandler<I, O> {
    const instance = this.get(phasedOperationName(operation));
    if (!(instance instanceof operation)) {
      throw new IdempotencyConfigurationError(`${operation.name} is not a provider of any module: add it to a module's providers.`);
    }
    return instance as PhasedOperationHandler<I, O>;
  }

  private discover(): Map<string, PhasedOperationHandler<unknown, unknown>> {
    const byName = new Map<string, PhasedOperationHandler<unknown, unknown>>();
    for (const wrapper of this.discovery.getProviders()) {
      const name = wrapper.metatype && Reflect.getMetadata(PHASED_OPERATION, wrapper.metatype);
      if (!name || !wrapper.instance) continue;
      if (byName.has(name) && byName.get(name) !== wrapper.instance) {
        throw new IdempotencyConfigurationError(`Two phased operations are named "${name}": names must be unique.`);
      }
      byName.set(name, wrapper.instance);
    }
    return byName;
  }
}
