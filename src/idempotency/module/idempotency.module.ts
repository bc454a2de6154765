import { type DynamicModule, Module, type OnModuleInit } from '@nestjs/common';
import { DiscoveryModule, DiscoveryService, MetadataScanner, ModulesContainer } from '@nestjs/core';
import { IdempotencyFacade } from '../http/idempotency.facade.js';
import { IdempotencyEventLog, IdempotencyEvents } from '../events/idempotency-events.js';
import { IdempotencyConfigurationError } from '../errors/idempotency.exceptions.js';
import { IdempotencyDataSource } from '../transactions/idempotency-data-source.js';
import { IdempotentRoutes } from '../http/idempotent-route.js';
import { IdempotencyExtensions } from '../http/idempotency-extensions.js';
import { IdempotentRoutesValidator } from './idempotent-routes.validator.js';
import { ConfigurableIdempotencyModule, IDEMPOTENCY_ASYNC_OPTIONS_TYPE, IDEMPOTENCY_MODULE_OPTIONS } from './idempotency.module-definition.js';
import { IdempotencyCompatibilityCheck, refuseUnsupportedVersions } from './idempotency-compatibility.check.js';
import { type IdempotencyModuleOptions, resolveModuleOptions, type ResolvedModuleOptions } from '../options/idempotency.options.js';
import { IdempotencyReaper } from '../reaper/idempotency.reaper.js';
import { NamedStatementsProbe } from '../driver/named-statements.js';
import { IdempotencySchemaCheck } from './idempotency-schema.check.js';
import { ServerSettingsCheck } from './server-settings.check.js';
import { IdleSessionTimeout } from '../driver/idle-session-timeout.js';
import { documentRoutes } from '../openapi/swagger.js';
import { FastReplay, ReplayLikelihood } from '../flow/fast-replay.js';
import { HandlerInTransaction } from '../flow/handler-in-transaction.js';
import { OneTransactionFlow } from '../flow/one-transaction.flow.js';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../options/idempotency.tokens.js';
import { OutcomeCodec } from '../records/outcome-codec.js';
import { RequestFingerprints } from '../fingerprint/request-fingerprints.js';
import { IdempotencyTables } from '../records/idempotency-tables.js';
import { ReplayCache } from '../flow/replay-cache.js';
import { IdempotencyTransactionHost } from '../transactions/transaction-host.js';
import { TransactionLibraries } from '../transactions/libraries/transaction-libraries.js';

/**
 * Import once, after TypeOrmModule: `IdempotencyModule.forRoot({ tenant: (req) => req.user?.tenantId })`.
 * It is global, so `@Idempotent()` and `IdempotencyTransactionHost` work in every module.
 * `dataSource: 'main'` serves a named connection instead of the default one.
 * At startup it checks its table, and fails the boot when the migration in
 * `idempotencyMigrations` has not run.
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    { provide: RESOLVED_IDEMPOTENCY_OPTIONS, useFactory: resolveModuleOptions, inject: [IDEMPOTENCY_MODULE_OPTIONS] },
    IdempotencyDataSource,
    IdempotencyTables,
    IdempotencyTransactionHost,
    TransactionLibraries,
    IdempotencyEvents,
    IdempotencyEventLog,
    {
      provide: ReplayCache,
      useFactory: (options: ResolvedModuleOptions) => new ReplayCache({ maxEntries: options.replayCacheSize, maxBytes: options.replayCacheBytes }),
      inject: [RESOLVED_IDEMPOTENCY_OPTIONS],
    },
    { provide: ReplayLikelihood, useFactory: () => new ReplayLikelihood() },
    { provide: OutcomeCodec, useFactory: (options: ResolvedModuleOptions) => new OutcomeCodec(options.encryption), inject: [RESOLVED_IDEMPOTENCY_OPTIONS] },
    { provide: RequestFingerprints, useFactory: (options: ResolvedModuleOptions) => new RequestFingerprints(options.encryption?.keys), inject: [RESOLVED_IDEMPOTENCY_OPTIONS] },
    IdempotentRoutes,
    IdempotentRoutesValidator,
    IdempotencySchemaCheck,
    IdempotencyCompatibilityCheck,
    IdleSessionTimeout,
    ServerSettingsCheck,
    NamedStatementsProbe,
    IdempotencyExtensions,
    FastReplay,
    OneTransactionFlow,
    HandlerInTransaction,
    IdempotencyReaper,
    IdempotencyFacade,
    {
      // A factory, so that it runs while the app is created, before SwaggerModule reads the metadata.
      provide: documentRoutes,
      useFactory: documentRoutes,
      inject: [DiscoveryService, MetadataScanner, IdempotentRoutes, RESOLVED_IDEMPOTENCY_OPTIONS],
    },
  ],
  // What apps inject, the one provider that the interceptors of @Idempotent() need (Nest builds them in the module
  // of each controller that uses them, from what that module can see), the tables the outbox and the admin name,
  // and what the feature modules (messaging, GraphQL, phases) register with and build on.
  exports: [IdempotencyTransactionHost, IdempotencyEvents, IdempotencyReaper, RESOLVED_IDEMPOTENCY_OPTIONS, IdempotencyFacade, IdempotencyTables, IdempotencyExtensions, IdempotencyDataSource, OutcomeCodec],
})
export class IdempotencyModule extends ConfigurableIdempotencyModule implements OnModuleInit {
  constructor(private readonly modules: ModulesContainer) {
    super();
  }

  /**
   * The module with these options; every option but `tenant` has a default,
   * so `IdempotencyModule.forRoot({ tenant: 'shared' })` runs with them all.
   * Refuses a Nest or TypeORM outside the supported ranges here, before Nest
   * scans the modules; options without `tenant` fail the boot where they are
   * resolved, as `forRootAsync()`'s do.
   */
  static forRoot(options: IdempotencyModuleOptions): DynamicModule {
    refuseUnsupportedVersions();
    // The builder's forRoot() requires its argument, and reads its keys: a JavaScript caller may give none.
    return super.forRoot(options ?? ({} as IdempotencyModuleOptions));
  }

  /** The module with options made by a factory, a class or an existing provider; refuses unsupported versions as `forRoot()` does. */
  static forRootAsync(options: typeof IDEMPOTENCY_ASYNC_OPTIONS_TYPE): DynamicModule {
    refuseUnsupportedVersions();
    return super.forRootAsync(options);
  }

  /**
   * Refuses a second import with other options: the module is global, and
   * the first import's providers serve every route, so a second one's
   * options (a tenant resolver, a retention) would be ignored without a word.
   */
  onModuleInit(): void {
    const all = [...this.modules.values()];
    const instances = all.filter((module) => module.metatype === IdempotencyModule);
    if (instances.length < 2) return;
    const importers = all.filter((module) => [...module.imports].some((imported) => instances.includes(imported as (typeof instances)[number])));
    throw new IdempotencyConfigurationError(
      `IdempotencyModule is imported ${instances.length} times with different options (by ${importers.map((module) => module.metatype.name).join(', ')}): ` +
        `it is global, and only one import's options would apply to every route. Import IdempotencyModule.forRoot() once, in the root module, with all the options.`,
    );
  }
}
