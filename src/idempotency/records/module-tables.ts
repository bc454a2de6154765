/**
 * The module's tables as its statements name them: qualified by their
 * schema, quoted, so that no `search_path` the app sets (`SET LOCAL
 * search_path TO tenant_x` in a handler's transaction, a role's or a
 * database's setting) can send a statement of the module to another table,
 * or to none. Functions and types stay unqualified: PostgreSQL looks in
 * pg_catalog before the search_path unless the path names pg_catalog itself.
 */
export interface ModuleTables {
  /** The schema both tables are in, as the catalog spells it. */
  readonly schema: string;
  /** `idempotency_records`, qualified: `"public".idempotency_records`. */
  readonly records: string;
  /** `idempotency_outbox`, qualified. */
  readonly outbox: string;
}

/** The tables in `schema`: the migrations create both in one schema, the first of the search_path they run on. */
export function moduleTablesIn(schema: string): ModuleTables {
  const qualifier = `"${schema.replace(/"/g, '""')}"`;
  return { schema, records: `${qualifier}.idempotency_records`, outbox: `${qualifier}.idempotency_outbox` };
}

/** `idempotency_records` as the catalog has it (`schema` null: there is none where it was looked for). */
export interface RecordsTableDescription {
  /** The connection's search_path, which the table is looked up on when no schema is given. */
  search_path: string;
  schema: string | null;
  columns: Record<string, { type: string; notNull: boolean }>;
  indexes: string[];
  constraints: string[];
}

/**
 * The table in the schema $1, or, when $1 is null, the one the connection's
 * search_path finds: where the migration, run on the same DataSource, put it.
 * One round trip; pg_catalog is readable by any role.
 */
const DESCRIBE_RECORDS_TABLE = `
  SELECT array_to_string(current_schemas(false), ', ') AS search_path,
         n.nspname AS schema,
         (SELECT coalesce(json_object_agg(a.attname, json_build_object('type', format_type(a.atttypid, a.atttypmod), 'notNull', a.attnotnull)), '{}')
            FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) AS columns,
         ARRAY(SELECT i.relname::text FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid = c.oid) AS indexes,
         ARRAY(SELECT k.conname::text FROM pg_constraint k WHERE k.conrelid = c.oid) AS constraints
    FROM (SELECT to_regclass(CASE WHEN $1::text IS NULL THEN 'idempotency_records' ELSE format('%I.idempotency_records', $1::text) END) AS oid) AS t
    LEFT JOIN pg_class c ON c.oid = t.oid AND c.relkind IN ('r', 'p')
    LEFT JOIN pg_namespace n ON n.oid = c.relnamespace`;

/** Reads `idempotency_records` from the catalog: in `schema`, or, without one, where the search_path finds it. */
export async function describeRecordsTable(query: (text: string, values: unknown[]) => Promise<RecordsTableDescription[]>, schema: string | undefined): Promise<RecordsTableDescription> {
  const [table] = await query(DESCRIBE_RECORDS_TABLE, [schema ?? null]);
  return table;
}
