import { ConfigurableModuleBuilder, type DynamicModule } from '@nestjs/common';
import { adminApiController } from './admin-api.controller.js';
import { adminPageController } from './admin-page.controller.js';
import type { IdempotencyAdminOptions } from './admin.options.js';
import { ADMIN_CONTROLLERS } from './admin.tokens.js';

/** What shapes the admin's controllers, so it is given to `forRoot()` and `forRootAsync()` alike, outside the factory. */
export interface AdminModuleExtras {
  /** Where the page (`<path>`) and the JSON API (`<path>/api`) are served, under the app's global prefix. Default `idempotency-admin`. */
  path: string;
  /**
   * Class decorators for the admin's controllers, e.g. your auth's
   * `Public()` so that a global guard leaves the admin to its own `guard`,
   * or `SkipThrottle()`. Default none.
   */
  decorators?: ClassDecorator[];
  /** Serves the HTML page beside the JSON API. Default true. */
  page?: boolean;
}

/** The controllers for the extras' path: each `forRoot()` gets classes of its own, since a controller's path is fixed on its class. */
function withControllers(definition: DynamicModule, { path, decorators = [], page = true }: AdminModuleExtras): DynamicModule {
  const trimmed = path.replace(/^\/+|\/+$/g, '');
  const controllers = [adminApiController(trimmed, decorators), ...(page ? [adminPageController(trimmed, decorators)] : [])];
  return { ...definition, controllers, providers: [...(definition.providers ?? []), { provide: ADMIN_CONTROLLERS, useValue: controllers }] };
}

export const {
  ConfigurableModuleClass: ConfigurableAdminModule,
  MODULE_OPTIONS_TOKEN: ADMIN_MODULE_OPTIONS,
} = new ConfigurableModuleBuilder<IdempotencyAdminOptions>()
  .setClassMethodName('forRoot')
  .setFactoryMethodName('createIdempotencyAdminOptions')
  .setExtras<AdminModuleExtras>({ path: 'idempotency-admin', page: true }, withControllers)
  .build();
