import type pg from 'pg';
import { withClient } from './bench-database.js';
import { reaperStatement } from './reaper-statement.js';

/** The shape of `idempotency_records` at one moment. */
export interface TableStats {
  /** Exact `count(*)`. */
  rows: number;
  /** `pg_total_relation_size`: heap, TOAST and every index. */
  totalBytes: number;
  heapBytes: number;
  primaryKeyBytes: number;
  expiresAtIndexBytes: number;
  /** Levels of the primary key B-tree, root included (pageinspect); undefined where the extension is not available. */
  primaryKeyLevels?: number;
  /** Average fullness of leaf pages in percent (pgstattuple): how much of an index is bloat. */
  primaryKeyLeafDensity?: number;
  expiresAtLeafDensity?: number;
  /** From the statistics collector, so approximate and a little late. */
  deadRows: number;
  /** Row updates since the database was made, and how many were HOT (no new index entries, pruned without VACUUM). */
  updates: number;
  hotUpdates: number;
  autovacuums: number;
  autoanalyzes: number;
}

const PRIMARY_KEY = 'idempotency_records_pkey';
const EXPIRES_AT_INDEX = 'idempotency_records_expires_at_idx';

/**
 * Sizes, exact row count and vacuum counters of `idempotency_records`; with
 * `inspectIndexes`, also the B-tree depth and leaf density, which read the
 * whole index and so take seconds on a large table.
 */
export async function tableStats(url: string, inspectIndexes: boolean): Promise<TableStats> {
  return withClient(url, async (client) => {
    const { rows } = await client.query<Record<string, string>>(
      `SELECT (SELECT count(*) FROM idempotency_records) AS rows,
              pg_total_relation_size(c.oid) AS total, pg_relation_size(c.oid) AS heap,
              pg_relation_size('${PRIMARY_KEY}') AS primary_key, pg_relation_size('${EXPIRES_AT_INDEX}') AS expires_at,
              s.n_dead_tup AS dead, s.n_tup_upd AS updates, s.n_tup_hot_upd AS hot_updates,
              s.autovacuum_count AS autovacuums, s.autoanalyze_count AS autoanalyzes
         FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid
        WHERE c.oid = 'idempotency_records'::regclass`,
    );
    const row = rows[0];
    const stats: TableStats = {
      rows: Number(row.rows),
      totalBytes: Number(row.total),
      heapBytes: Number(row.heap),
      primaryKeyBytes: Number(row.primary_key),
      expiresAtIndexBytes: Number(row.expires_at),
      deadRows: Number(row.dead),
      updates: Number(row.updates),
      hotUpdates: Number(row.hot_updates),
      autovacuums: Number(row.autovacuums),
      autoanalyzes: Number(row.autoanalyzes),
    };
    if (inspectIndexes) Object.assign(stats, await inspect(client));
    return stats;
  });
}

/** B-tree depth and leaf density, when the server has pageinspect and pgstattuple and lets this user create them. */
async function inspect(client: pg.Client): Promise<Partial<TableStats>> {
  try {
    await client.query('CREATE EXTENSION IF NOT EXISTS pageinspect');
    await client.query('CREATE EXTENSION IF NOT EXISTS pgstattuple');
    const { rows } = await client.query<{ levels: number; primary_density: number; expires_density: number }>(
      `SELECT (SELECT level + 1 FROM bt_metap('${PRIMARY_KEY}'))::int AS levels,
              (SELECT avg_leaf_density FROM pgstatindex('${PRIMARY_KEY}'))::float8 AS primary_density,
              (SELECT avg_leaf_density FROM pgstatindex('${EXPIRES_AT_INDEX}'))::float8 AS expires_density`,
    );
    return { primaryKeyLevels: rows[0].levels, primaryKeyLeafDensity: rows[0].primary_density, expiresAtLeafDensity: rows[0].expires_density };
  } catch {
    return {};
  }
}

/**
 * The plan of the reaper's batch (the statement `IdempotencyReaper` sends,
 * see reaper-statement.ts, explained, not run), one node a line: whether a
 * large backlog, dead rows or bloat turn its walk of the `expires_at` index
 * into something else.
 */
export async function reaperPlan(url: string, batchSize: number): Promise<string[]> {
  const statement = await reaperStatement(url);
  return withClient(url, async (client) => {
    // No time given, as on the reaper's timer: expiry is the database's clock, and the plan holds no literal that changes between runs.
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN (COSTS OFF) ${statement}`, [null, batchSize]);
    return rows.map((row) => row['QUERY PLAN'].trim());
  });
}
