import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { OutboxModuleOptions } from './outbox.options.js';

export const {
  ConfigurableModuleClass: ConfigurableOutboxModule,
  MODULE_OPTIONS_TOKEN: OUTBOX_MODULE_OPTIONS,
} = new ConfigurableModuleBuilder<OutboxModuleOptions>()
  .setClassMethodName('forRoot')
  .setFactoryMethodName('createOutboxOptions')
  .setExtras({}, (definition) => ({ ...definition, global: true }))
  .build();
