import { Injectable, type OnModuleInit } from '@nestjs/common';
import { AddIdempotencyAdminIndexes1764400020000 } from '../../../migrations/1764400020000-AddIdempotencyAdminIndexes.js';
import { IdempotencyDataSource } from '../transactions/idempotency-data-source.js';
import { IdempotencyConfigurationError } from '../errors/idempotency.exceptions.js';
import { IdempotencyTables } from '../records/idempotency-tables.js';
import { AdminIndexes } from './admin.statements.js';

/**
 * Checks at startup that the indexes the admin's lists walk are there, in
 * the schema of the module's tables, so that a missing migration fails the
 * boot with its name rather than turning a list into a scan.
 * (IdempotencyModule's own check covers the records' table; the outbox has
 * none of its own.)
 */
@Injectable()
export class AdminSchemaCheck implements OnModuleInit {
  constructor(
    private readonly served: IdempotencyDataSource,
    private readonly tables: IdempotencyTables,
  ) {}

  async onModuleInit(): Promise<void> {
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
}
