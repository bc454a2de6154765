import { Injectable, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { RESOLVER_PROPERTY_METADATA, RESOLVER_TYPE_METADATA } from './graphql-call.js';
import { IdempotentMutations } from './idempotent-mutations.js';

/**
 * Works out every `@Idempotent()` resolver method at startup, so that one on
 * a query, a subscription or a field resolver, or a phased one, fails the
 * boot instead of a request.
 */
@Injectable()
export class IdempotentMutationsValidator implements OnModuleInit {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly mutations: IdempotentMutations,
  ) {}

  onModuleInit(): void {
    for (const wrapper of this.discovery.getProviders()) {
      const resolver = wrapper.metatype as Function | null;
      if (typeof resolver !== 'function' || !resolver.prototype) continue;
      for (const name of this.scanner.getAllMethodNames(resolver.prototype)) {
        const handler = resolver.prototype[name];
        const resolves = Reflect.hasMetadata(RESOLVER_TYPE_METADATA, handler) || Reflect.hasMetadata(RESOLVER_PROPERTY_METADATA, handler);
        if (resolves) this.mutations.of(resolver, handler);
      }
    }
  }
}
