import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { CreateIdempotencyRecords1764400000000 } from '../../../migrations/1764400000000-CreateIdempotencyRecords.js';
import { AddIdempotencyAdminIndexes1764400020000 } from '../../../migrations/1764400020000-AddIdempotencyAdminIndexes.js';
import { IdempotencyDataSource } from '../transactions/idempotency-data-source.js';
import { IdempotencyConfigurationError } from '../errors/idempotency.exceptions.js';
import type { ResolvedModuleOptions } from '../options/idempotency.options.js';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../options/idempotency.tokens.js';
import { IdempotencyTables } from '../records/idempotency-tables.js';
import type { RecordsTableDescription } from '../records/module-tables.js';

/**
 * What the module's statements rely on, as the migration creates it: each
 * column's type as `format_type` prints it, and its nullability. A later
 * migration that changes the table updates these, and `MIGRATION`, with it.
 */
const COLUMNS: ReadonlyArray<readonly [name: string, type: string, notNull: boolean]> = [
  ['scope', 'text', true],
  ['operation', 'text', true],
  ['key', 'text', true],
  ['fingerprint', 'text', true],
  ['status', 'text', true],
  ['response_status', 'smallint', false],
  ['response_headers', 'jsonb', false],
  ['response_body', 'text', false],
  ['created_at', 'timestamp with time zone', true],
  ['completed_at', 'timestamp with time zone', false],
  ['expires_at', 'timestamp with time zone', true],
  ['owner_token', 'uuid', false],
  ['lease_expires_at', 'timestamp with time zone', false],
  ['recovery_point', 'text', false],
  ['phase_results', 'jsonb', true],
  ['resume', 'jsonb', false],
  ['attempts', 'integer', true],
  ['failure_reason', 'text', false],
];
const INDEXES = ['idempotency_records_pkey', 'idempotency_records_expires_at_idx', 'idempotency_records_lease_idx'];
const CONSTRAINTS = ['idempotency_records_status_check', 'idempotency_records_outcome_chk'];
/** Indexes a later migration adds, with its name: the one to run when the index is missing. */
const LATER_INDEXES: ReadonlyArray<readonly [name: string, migration: string]> = [['idempotency_records_created_at_idx', AddIdempotencyAdminIndexes1764400020000.name]];

const MIGRATION = CreateIdempotencyRecords1764400000000.name;
const HOW_TO_RUN =
  "spread `idempotencyMigrations` into the DataSource's `migrations` and set `migrationsRun: true`, " +
  'or run `typeorm migration:run` with that DataSource';

/**
 * Checks at startup that `idempotency_records` is there as the migration
 * creates it (columns, indexes, constraints), in the `schema` option or
 * where the search_path finds it, so that a missing migration fails the boot
 * with the fix instead of every request and reaper pass. Extra columns,
 * indexes and constraints are allowed. Its read of the catalog is the one
 * that names the module's tables (`IdempotencyTables`).
 */
@Injectable()
export class IdempotencySchemaCheck implements OnModuleInit {
  constructor(
    private readonly served: IdempotencyDataSource,
    private readonly tables: IdempotencyTables,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedModuleOptions,
  ) {}

  async onModuleInit(): Promise<void> {
    const dataSource = this.served.dataSource;
    // TypeOrmModule initialises its DataSource (and runs its migrations) before providing it, unless told not to.
    if (!dataSource.isInitialized) {
      throw new IdempotencyConfigurationError(
        'IdempotencyModule cannot start: its DataSource is not initialised yet. Let TypeOrmModule initialise it ' +
          '(no `manualInitialization`), or call `dataSource.initialize()` before the application initialises.',
      );
    }
    const problems = schemaProblems(await this.tables.describe(), this.options.schema);
    if (problems) throw new IdempotencyConfigurationError(problems);
  }
}

/** Why the table does not do, or undefined when it does; `schema` is the option, when given. */
function schemaProblems(table: RecordsTableDescription, schema: string | undefined): string | undefined {
  if (!table.schema && schema !== undefined) {
    // The migration creates the table in the first schema of the search_path it runs on.
    return (
      `IdempotencyModule cannot start: there is no table idempotency_records in the schema ${JSON.stringify(schema)} (the \`schema\` option). ` +
      `Run the migration ${MIGRATION} with that schema first on the DataSource's search_path (e.g. \`extra: { options: '-c search_path=${schema}' }\`): ${HOW_TO_RUN}. ` +
      'If it ran in another schema, set `schema` to that one.'
    );
  }
  if (!table.schema) {
    return (
      `IdempotencyModule cannot start: there is no table idempotency_records on the search_path (${table.search_path || 'empty'}). ` +
      `Run the migration ${MIGRATION}: ${HOW_TO_RUN}. If it ran in a schema off the search_path, name that schema in IdempotencyModule's \`schema\` option.`
    );
  }
  const differences: string[] = [];
  for (const [name, type, notNull] of COLUMNS) {
    const column = table.columns[name];
    if (!column) differences.push(`column ${name} is missing`);
    else if (column.type !== type) differences.push(`column ${name} is ${column.type}, not ${type}`);
    else if (column.notNull !== notNull) differences.push(`column ${name} is ${column.notNull ? 'NOT NULL' : 'nullable'}, not ${notNull ? 'NOT NULL' : 'nullable'}`);
  }
  for (const name of INDEXES) if (!table.indexes.includes(name)) differences.push(`index ${name} is missing`);
  for (const [name, migration] of LATER_INDEXES) if (!table.indexes.includes(name)) differences.push(`index ${name} is missing (the migration ${migration} adds it)`);
  for (const name of CONSTRAINTS) if (!table.constraints.includes(name)) differences.push(`constraint ${name} is missing`);
  if (differences.length === 0) return undefined;
  return (
    `IdempotencyModule cannot start: the table ${table.schema}.idempotency_records is not as the migration ${MIGRATION} creates it: ` +
    `${differences.join('; ')}. If it has not run, ${HOW_TO_RUN}. If it has, the table was changed since: restore what is listed as the migration defines it.`
  );
}
