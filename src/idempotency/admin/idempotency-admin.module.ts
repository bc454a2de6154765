import { Logger, Module, type Type } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { IdempotencyEvents } from '../events/idempotency-events.js';
import { IdempotencyDataSource } from '../transactions/idempotency-data-source.js';
import type { ResolvedModuleOptions } from '../options/idempotency.options.js';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../options/idempotency.tokens.js';
import { OutcomeCodec } from '../records/outcome-codec.js';
import { IdempotencyTables } from '../records/idempotency-tables.js';
import { OperationRegistry } from '../phases/operation-registry.js';
import { ReplayCache } from '../flow/replay-cache.js';
import { adminActionLine } from './admin-action-line.js';
import { adminDatabaseOf } from './admin-database.js';
import { documentAdminApi } from './admin-openapi.js';
import { AdminPageFilter } from './admin-page.filter.js';
import { AdminCallers } from './admin-request.js';
import { AdminSchemaCheck } from './admin-schema.check.js';
import { AdminGuard } from './admin.guard.js';
import { ADMIN_MODULE_OPTIONS, ConfigurableAdminModule } from './admin.module-definition.js';
import { type IdempotencyAdminOptions, resolveAdminOptions, type ResolvedAdminOptions } from './admin.options.js';
import { ADMIN_CONTROLLERS, RESOLVED_ADMIN_OPTIONS } from './admin.tokens.js';
import { IdempotencyAdmin } from './idempotency-admin.js';
import { ReleasedKeysListener } from './released-keys.listener.js';

/**
 * The admin over the DataSource IdempotencyModule serves and its tables, its statements bounded by the admin's
 * options, with its codec (plaintext read too), its events and their audit lines.
 */
function adminFactory(
  served: IdempotencyDataSource,
  tables: IdempotencyTables,
  admin: ResolvedAdminOptions,
  events: IdempotencyEvents,
  options: ResolvedModuleOptions,
  moduleRef: ModuleRef,
): IdempotencyAdmin {
  // Phased operations are registered where the app imports IdempotencyPhasesModule; without it, none is.
  const registry = (): OperationRegistry | undefined => {
    try {
      return moduleRef.get(OperationRegistry, { strict: false });
    } catch {
      return undefined;
    }
  };
  const cache = () => moduleRef.get(ReplayCache, { strict: false });
  // The audit line of each action, in the app's log as the CLI's standard error has it.
  const logger = new Logger('Idempotency');
  return new IdempotencyAdmin(
    adminDatabaseOf(
      () => served.dataSource,
      () => tables.names,
      { statementTimeout: admin.statementTimeout, connections: admin.connections },
    ),
    {
      // An operator reads what is stored, whatever `acceptPlaintext` lets requests replay.
      codec: new OutcomeCodec(options.encryption && { ...options.encryption, acceptPlaintext: true }),
      emit: (event) => {
        events.emit(event);
        logger.warn(adminActionLine(event));
      },
      retention: options.retention,
      registered: (operation) => registry()?.get(operation) !== undefined,
      released: (id) => cache().forget(id),
    },
  );
}

/**
 * The operators' side of the module, opt-in: a JSON API at `<path>/api`
 * (documented in OpenAPI when @nestjs/swagger is installed) and an HTML page
 * at `<path>` to find records, list unfinished phased operations and outbox
 * events, release keys, mark operations failed and requeue dead letters,
 * behind a guard the app provides (it refuses to start without one). Import
 * it after IdempotencyModule. `IdempotencyAdmin` is exported for the app's
 * own use. Every instance importing it hears released keys and drops their
 * cached outcomes.
 *
 * @example
 * IdempotencyAdminModule.forRoot({
 *   path: 'admin/idempotency',
 *   guard: (context) => context.switchToHttp().getRequest().user?.roles?.includes('admin'),
 *   scopes: (request) => (request.user.staff ? 'all' : [tenantScope(request.user.tenantId)]),
 *   actor: (request) => request.user.email,
 * })
 */
@Module({
  providers: [
    {
      provide: RESOLVED_ADMIN_OPTIONS,
      // A guard class is created here, with what it injects from the admin module's imports and the global modules.
      useFactory: (options: IdempotencyAdminOptions, moduleRef: ModuleRef) => resolveAdminOptions(options, (guard) => moduleRef.create(guard)),
      inject: [ADMIN_MODULE_OPTIONS, ModuleRef],
    },
    // The DataSource IdempotencyModule serves, looked up from the same option: that module keeps its own to itself.
    IdempotencyDataSource,
    AdminSchemaCheck,
    AdminGuard,
    AdminCallers,
    AdminPageFilter,
    { provide: IdempotencyAdmin, useFactory: adminFactory, inject: [IdempotencyDataSource, IdempotencyTables, RESOLVED_ADMIN_OPTIONS, IdempotencyEvents, RESOLVED_IDEMPOTENCY_OPTIONS, ModuleRef] },
    ReleasedKeysListener,
    // A factory, so that it runs while the app is created, before SwaggerModule reads the metadata.
    { provide: documentAdminApi, useFactory: (controllers: Type[]) => documentAdminApi(controllers), inject: [ADMIN_CONTROLLERS] },
  ],
  exports: [IdempotencyAdmin],
})
export class IdempotencyAdminModule extends ConfigurableAdminModule {}
