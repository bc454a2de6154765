import { type DynamicModule, Module } from '@nestjs/common';
import { IdempotencyDataSource } from '../transactions/idempotency-data-source.js';
import { Outbox } from './outbox.js';
import { ConfigurableOutboxModule, OUTBOX_MODULE_OPTIONS } from './outbox.module-definition.js';
import { type OutboxModuleOptions, resolveOutboxOptions } from './outbox.options.js';
import { OutboxReaping } from './outbox.reaping.js';
import { OutboxRelay } from './outbox.relay.js';
import { RESOLVED_OUTBOX_OPTIONS } from './outbox.tokens.js';

/**
 * The transactional outbox: `Outbox.add()` writes events in the current
 * transaction, the relay delivers them through the publisher, and the reaper
 * deletes settled ones after the retention. Import it after
 * IdempotencyModule; it is global. Without a publisher, events are written
 * and not delivered by this instance.
 *
 * @example
 * IdempotencyOutboxModule.forRootAsync({
 *   useFactory: async () => ({ publisher: await JetStreamPublisher.connect({ servers: 'nats://127.0.0.1:4222', stream: { name: 'EVENTS', subjects: ['events.>'] } }) }),
 * })
 */
@Module({
  providers: [
    { provide: RESOLVED_OUTBOX_OPTIONS, useFactory: resolveOutboxOptions, inject: [OUTBOX_MODULE_OPTIONS] },
    // The DataSource IdempotencyModule serves, looked up from the same option: that module keeps its own to itself.
    IdempotencyDataSource,
    Outbox,
    OutboxRelay,
    OutboxReaping,
  ],
  exports: [Outbox, OutboxRelay, OutboxReaping],
})
export class IdempotencyOutboxModule extends ConfigurableOutboxModule {
  /** The outbox with these options; every option has a default, so `IdempotencyOutboxModule.forRoot()` writes events that another process delivers. */
  static forRoot(options: OutboxModuleOptions = {}): DynamicModule {
    // The builder's forRoot() requires its argument, and reads its keys.
    return super.forRoot(options);
  }
}
