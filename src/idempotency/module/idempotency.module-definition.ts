import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { IdempotencyModuleOptions } from '../options/idempotency.options.js';

export const {
  ConfigurableModuleClass: ConfigurableIdempotencyModule,
  /** The injection token of the options as given to `forRoot()` or made by `forRootAsync()`, before defaults. */
  MODULE_OPTIONS_TOKEN: IDEMPOTENCY_MODULE_OPTIONS,
  OPTIONS_TYPE: IDEMPOTENCY_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: IDEMPOTENCY_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<IdempotencyModuleOptions>()
  .setClassMethodName('forRoot')
  .setFactoryMethodName('createIdempotencyOptions')
  .setExtras({}, (definition) => ({ ...definition, global: true }))
  .build();
