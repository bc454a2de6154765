import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { AddIdempotencyAdminIndexes1764400020000 } from '../../../migrations/1764400020000-AddIdempotencyAdminIndexes.js';
import { IdempotencyDataSource } from '../transactions/idempotency-data-source.js';
import { IdempotencyConfigurationError } from '../errors/idempotency.exceptions.js';
import { IdempotencyTables } from '../records/idempotency-tables.js';
import { AdminIndexes } from './admin.statements.js';
import type { ResolvedAdminOptions } from './admin.options.js';
import { RESOLVED_ADMIN_OPTIONS } from './admin.tokens.js';

/** pg's pool size when neither `extra.max` nor `poolSize` sets one. */
const PG_DEFAULT_POOL = 10;

/**
 * Checks at startup that the indexes the admin's lists walk are there, in
 * the schema of the module's tables, so that a missing migration fails the
 * boot with its name rather than turning a list into a scan.
 * (IdempotencyModule's own check covers the records' table; the outbox has
 * none of its own.) And that the admin's `connections` leave the app some of
 * its pool.
 */
@Injectable()
export class AdminSchemaCheck implements OnModuleInit {
  constructor(
    private readonly served: IdempotencyDataSource,
    private readonly tables: IdempotencyTables,
    @Inject(RESOLVED_ADMIN_OPTIONS) private readonly admin: ResolvedAdminOptions,
  ) {}

  async onModuleInit(): Promise<void> {
    this.checkPool();
    // Without the records' table, IdempotencyModule's check fails the boot, naming the migration to run.
    if ((await this.tables.describe()).schema === null) return;
    const names = Object.values(AdminIndexes);
    const [{ missing }] = await this.served.dataSource.query(
      `SELECT ARRAY(SELECT name FROM unnest($1::text[]) AS name WHERE to_regclass(format('%I.%I', $2::text, name)) IS NULL) AS missing`,
      [names, this.tables.names.schema],
    );
    if (missing.length === 0) return;
    throw new IdempotencyConfigurationError(
      `IdempotencyAdminModule cannot start: index ${missing.join(', ')} is missing. Run the migration ${AddIdempotencyAdminIndexes1764400020000.name} ` +
        "(in `idempotencyMigrations`): spread `idempotencyMigrations` into the DataSource's `migrations` and set `migrationsRun: true`, or run `typeorm migration:run`.",
    );
  }

  /** The pool TypeORM's postgres driver builds: `extra.max` over `poolSize`, else pg's default. */
  private checkPool(): void {
    const { extra, poolSize } = this.served.dataSource.options as { extra?: { max?: number }; poolSize?: number };
    const pool = extra?.max ?? poolSize ?? PG_DEFAULT_POOL;
    if (this.admin.connections < pool) return;
    throw new IdempotencyConfigurationError(
      `IdempotencyAdminModule's \`connections\` (${this.admin.connections}) would let the admin hold every connection of the app's pool (${pool}), and its searches starve the app's requests. ` +
        'Give it fewer (`connections: 1`, the default), or give the pool more (the DataSource\'s `poolSize` or `extra.max`).',
    );
  }
}
