import { Injectable, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { IdempotentRoutes } from './idempotent-route.js';
import { IdempotencyConfigurationError } from './idempotency.exceptions.js';
import { RESPONSE_PASSTHROUGH_METADATA, ROUTE_ARGS_METADATA, RouteParamtypes, SSE_METADATA } from './nest-internals.js';

/**
 * Checks every `@Idempotent()` route at startup, so that a route whose
 * outcome cannot be recorded fails the boot instead of a request.
 */
@Injectable()
export class IdempotentRoutesValidator implements OnModuleInit {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly routes: IdempotentRoutes,
  ) {}

  onModuleInit(): void {
    for (const wrapper of this.discovery.getControllers()) {
      const controller = wrapper.metatype as Function | null;
      if (!controller?.prototype) continue;
      for (const name of this.scanner.getAllMethodNames(controller.prototype)) {
        const handler = controller.prototype[name];
        const route = this.routes.of(controller, handler);
        if (route) this.checkResponseIsRecordable(controller, name, handler, route.lease !== undefined);
      }
    }
  }

  private checkResponseIsRecordable(controller: Function, name: string, handler: Function, phased: boolean): void {
    const where = `@Idempotent() on ${controller.name}.${name}`;
    if (Reflect.getMetadata(SSE_METADATA, handler)) {
      throw new IdempotencyConfigurationError(`${where}: server-sent events cannot be recorded or replayed. Remove @Idempotent() or @Sse().`);
    }
    const params: Record<string, { index: number }> = Reflect.getMetadata(ROUTE_ARGS_METADATA, controller, name) ?? {};
    const takesResponse = Object.keys(params).some((key) => {
      const type = Number(key.split(':')[0]);
      return type === RouteParamtypes.RESPONSE || type === RouteParamtypes.NEXT;
    });
    if (takesResponse && phased) {
      throw new IdempotencyConfigurationError(
        `${where}: a phased route answers its operation's response, which the reaper may record without a request. Remove @Res() and return claim.run(...); set headers such as Location in the operation's respond().`,
      );
    }
    if (takesResponse && !Reflect.getMetadata(RESPONSE_PASSTHROUGH_METADATA, controller, name)) {
      throw new IdempotencyConfigurationError(
        `${where}: a handler that writes the response itself (@Res() or @Next()) cannot be recorded. Use @Res({ passthrough: true }) and return the body.`,
      );
    }
  }
}
