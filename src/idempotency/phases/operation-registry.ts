import { Injectable, type Type } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import { IdempotencyConfigurationError } from '../errors/idempotency.exceptions.js';
import { operationName, PHASED_OPERATION, type PhasedOperation } from './phased-operation.js';

/** Every `@PhasedOperation()` provider of the app, by name. */
@Injectable()
export class OperationRegistry {
  private byName?: Map<string, PhasedOperation<unknown, unknown>>;

  constructor(private readonly discovery: DiscoveryService) {}

  get(name: string): PhasedOperation<unknown, unknown> | undefined {
    this.byName ??= this.discover();
    return this.byName.get(name);
  }

  instanceOf<I, O>(operation: Type<PhasedOperation<I, O>>): PhasedOperation<I, O> {
    const instance = this.get(operationName(operation));
    if (!(instance instanceof operation)) {
      throw new IdempotencyConfigurationError(`${operation.name} is not a provider of any module: add it to a module's providers.`);
    }
    return instance as PhasedOperation<I, O>;
  }

  private discover(): Map<string, PhasedOperation<unknown, unknown>> {
    const byName = new Map<string, PhasedOperation<unknown, unknown>>();
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
