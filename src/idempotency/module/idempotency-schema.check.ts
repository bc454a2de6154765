import { Injectable, type OnModuleInit } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DataSource } from 'typeorm';
import { CreateIdempotencyRecords1764400000000 } from '../../../migrations/1764400000000-CreateIdempotencyRecords.js';
import { AddIdempotencyAdminIndexes1764400020000 } from '../../../migrations/1764400020000-AddIdempotencyAdminIndexes.js';
import { isConnectionLost } from '../driver/database-errors.js';
import { IdempotencyDataSource } from '../transactions/idempotency-data-source.js';
import { IdempotencyConfigurationError } from '../errors/idempotency.exceptions.js';

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

/**
 * The table as the module's own (unqualified) statements find it: through
 * the connection's search_path. One round trip; pg_catalog is readable by
 * any role.
 */
const DESCRIBE_TABLE = `
  SELECT array_to_string(current_schemas(false), ', ') AS search_path,
         n.nspname AS schema,
         (SELECT coalesce(json_object_agg(a.attname, json_build_object('type', format_type(a.atttypid, a.atttypmod), 'notNull', a.attnotnull)), '{}')
            FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) AS columns,
         ARRAY(SELECT i.relname::text FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid = c.oid) AS indexes,
         ARRAY(SELECT k.conname::text FROM pg_constraint k WHERE k.conrelid = c.oid) AS constraints
    FROM (SELECT to_regclass('idempotency_records') AS oid) AS t
    LEFT JOIN pg_class c ON c.oid = t.oid AND c.relkind IN ('r', 'p')
    LEFT JOIN pg_namespace n ON n.oid = c.relnamespace`;

interface TableDescription {
  search_path: string;
  schema: string | null;
  columns: Record<string, { type: string; notNull: boolean }>;
  indexes: string[];
  constraints: string[];
}

const MIGRATION = CreateIdempotencyRecords1764400000000.name;
const DESCRIBE_ATTEMPTS = 5;
const DESCRIBE_RETRY_MS = 200;
const HOW_TO_RUN =
  "spread `idempotencyMigrations` into the DataSource's `migrations` and set `migrationsRun: true`, " +
  'or run `typeorm migration:run` with that DataSource';

/**
 * Checks at startup that `idempotency_records` is there as the migration
 * creates it (columns, indexes, constraints), so that a missing migration
 * fails the boot with the fix instead of every request and reaper pass.
 * Extra columns, indexes and constraints are allowed.
 */
@Injectable()
export class IdempotencySchemaCheck implements OnModuleInit {
  constructor(private readonly served: IdempotencyDataSource) {}

  async onModuleInit(): Promise<void> {
    const dataSource = this.served.dataSource;
    // TypeOrmModule initialises its DataSource (and runs its migrations) before providing it, unless told not to.
    if (!dataSource.isInitialized) {
      throw new IdempotencyConfigurationError(
        'IdempotencyModule cannot start: its DataSource is not initialised yet. Let TypeOrmModule initialise it ' +
          '(no `manualInitialization`), or call `dataSource.initialize()` before the application initialises.',
      );
    }
    const [table] = await describeTable(dataSource);
    const problems = schemaProblems(table);
    if (problems) throw new IdempotencyConfigurationError(problems);
  }
}

/** The table as the database has it. A connection lost meanwhile (a restart, a terminated backend) is retried, so it does not fail the boot. */
async function describeTable(dataSource: DataSource): Promise<TableDescription[]> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await dataSource.query(DESCRIBE_TABLE);
    } catch (error) {
      if (attempt >= DESCRIBE_ATTEMPTS || !isConnectionLost(error)) throw error;
      await sleep(DESCRIBE_RETRY_MS);
    }
  }
}

/** Why the table does not do, or undefined when it does. */
function schemaProblems(table: TableDescription): string | undefined {
  if (!table.schema) {
    return (
      `IdempotencyModule cannot start: there is no table idempotency_records on the search_path (${table.search_path || 'empty'}). ` +
      `Run the migration ${MIGRATION}: ${HOW_TO_RUN}.`
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
