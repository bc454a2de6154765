import { DataSource } from 'typeorm';
import { dataSourceOptions } from '../src/demo/database/data-source-options.js';
import { BENCH_TENANT } from './bare-order-transaction.js';
import { withClient } from './bench-database.js';
import { GROWTH_ROUTE } from './growth-results.js';

/** Live records expire in the next 1 to 24 hours; expired ones expired 1 to 24 hours ago, just-expired ones in the last hour. */
export type RecordKind = 'live' | 'expired' | 'just-expired';

/** Records to add to one database's `idempotency_records`. */
export interface SeedTarget {
  url: string;
  kind: RecordKind;
  count: number;
  /** Makes the keys of this target unique: targets never share a salt within a database. */
  salt: string;
}

/** Rows per INSERT … SELECT: large enough that statement overhead vanishes, small enough to report progress. */
const CHUNK_ROWS = 1_000_000;
/** Chunks in flight at once: the machine has two cores, and inserting is half CPU, half I/O. */
const SEED_CONNECTIONS = 2;
const HOUR_SECONDS = 3600;

/** Each kind's first `created_at`, in seconds from now, and the seconds over which the others follow; retention is 24 hours. */
const CREATED: Record<RecordKind, { from: number; span: number }> = {
  live: { from: -23 * HOUR_SECONDS, span: 23 * HOUR_SECONDS },
  expired: { from: -48 * HOUR_SECONDS, span: 23 * HOUR_SECONDS },
  'just-expired': { from: -25 * HOUR_SECONDS, span: HOUR_SECONDS - 60 },
};

/**
 * One chunk of completed records, made in SQL. They look like what the module
 * writes for real traffic: a quarter belong to the bench route's own tenant
 * and operation (so its fresh keys land among them in the primary key), the
 * rest to seven other tenants and four other operations; keys are random
 * UUIDs, fingerprints 64 hex digits, bodies an order view of 200-300 bytes
 * with its `Location` and `Content-Type`. `created_at` rises with the
 * series, so heap order follows expiry order as it does when rows arrive
 * over time; retention is 24 hours.
 *
 * $1, $2: the chunk's series bounds; $3: the target's count; $4: the salt;
 * $5: seconds from now to the first `created_at`, $6: over how many seconds
 * the others follow; $7, $8: the bench route's tenant and operation.
 */
const SEED_SQL = `
  INSERT INTO idempotency_records (scope, operation, key, fingerprint, status, response_status, response_headers, response_body, created_at, completed_at, expires_at)
  SELECT 'tenant:' || r.tenant, r.operation, r.k::uuid::text, reverse(r.k) || r.o, 'completed', 201,
         ('{"location": "/orders/' || r.order_id || '", "content-type": "application/json; charset=utf-8"}')::jsonb,
         '{"id":"' || r.order_id || '","tenant":"' || r.tenant || '","sku":"sku-' || (g % 5000) || '","quantity":' || (1 + g % 9)
           || ',"note":"' || left(r.o || r.k || r.o || r.k, 60 + (g % 100)::int) || '","status":"created","createdAt":"'
           || to_char(r.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') || '"}',
         r.created_at, r.created_at + (20 + g % 80) * interval '1 millisecond', r.created_at + interval '24 hours'
    FROM generate_series($1::bigint, $2::bigint) AS g
   CROSS JOIN LATERAL (
     SELECT CASE WHEN g % 4 = 0 THEN $7::text ELSE (ARRAY['acme', 'globex', 'initech', 'umbrella', 'hooli', 'stark', 'wayne'])[1 + (g / 4) % 7] END AS tenant,
            CASE WHEN g % 4 = 0 THEN $8::text ELSE (ARRAY['POST /orders', 'POST /orders/:id/payments', 'POST /refunds', 'PUT /customers/:id'])[1 + (g / 28) % 4] END AS operation,
            md5($4::text || '.k.' || g) AS k,
            md5($4::text || '.o.' || g) AS o,
            now() + ($5::float8 + (g - 1)::float8 / $3::float8 * $6::float8) * interval '1 second' AS created_at) AS r0
   CROSS JOIN LATERAL (SELECT r0.o::uuid::text AS order_id, r0.*) AS r`;

/** The bench route's operation name, as `@Idempotent()` derives it: method and route template. */
export const BENCH_OPERATION = `POST ${GROWTH_ROUTE}`;

/** Runs the migrations on a fresh database, as the bench app would at startup, so the table exists before seeding. */
export async function migrate(url: string): Promise<void> {
  const dataSource = new DataSource({ ...dataSourceOptions(url), extra: { max: 1 } });
  await dataSource.initialize();
  await dataSource.destroy();
}

/**
 * Checkpoint spacing while seeding a server of the run's own. Random keys
 * touch most primary key leaves between two checkpoints, and the first touch
 * of a page after a checkpoint writes the whole page to the WAL, which at the
 * default `max_wal_size` brings the next checkpoint forward. Measurements run
 * with the server's defaults again.
 */
const SEEDING_SETTINGS: Record<string, string> = { max_wal_size: '16GB', checkpoint_timeout: '30min' };

/** How to seed. */
export interface SeedingOptions {
  /** VACUUM ANALYZE and CHECKPOINT afterwards. Default true. */
  vacuum?: boolean;
  /** Space checkpoints out while seeding (ALTER SYSTEM), then reset them: only on a server the run owns. Default false. */
  relaxCheckpoints?: boolean;
}

/**
 * Inserts the targets' records in chunks of a million rows, a few chunks at
 * once, then VACUUM ANALYZE on each database and a CHECKPOINT, so that
 * measurements start with planner statistics, a visibility map and no
 * backlog of dirty pages. Resolves to the seconds taken.
 */
export async function seedRecords(targets: readonly SeedTarget[], log: (line: string) => void, options: SeedingOptions = {}): Promise<number> {
  const started = Date.now();
  const relaxed = options.relaxCheckpoints && targets.length > 0 ? targets[0].url : undefined;
  if (relaxed) await configure(relaxed, SEEDING_SETTINGS);
  try {
    await insertChunks(targets, (done, total) => log(`seeded ${done.toLocaleString('en-US')} of ${total.toLocaleString('en-US')} records (${elapsed(started)} s)`));
  } finally {
    if (relaxed) await configure(relaxed, Object.fromEntries(Object.keys(SEEDING_SETTINGS).map((name) => [name, undefined])));
  }
  if (options.vacuum ?? true) {
    const urls = [...new Set(targets.filter((target) => target.count > 0).map((target) => target.url))];
    await inParallel(urls, SEED_CONNECTIONS, (url) => withClient(url, (client) => client.query('VACUUM ANALYZE idempotency_records')));
    // Superuser only; without it the first measurements may share the disk with the checkpointer.
    if (urls.length) await withClient(urls[0], (client) => client.query('CHECKPOINT')).catch(() => undefined);
  }
  return Number(elapsed(started));
}

/** The INSERT statements, a few at once; `progress` after each when there are several. */
async function insertChunks(targets: readonly SeedTarget[], progress: (done: number, total: number) => void): Promise<void> {
  const chunks = targets.flatMap((target) => {
    const list: Array<{ target: SeedTarget; from: number; to: number }> = [];
    for (let from = 1; from <= target.count; from += CHUNK_ROWS) list.push({ target, from, to: Math.min(target.count, from + CHUNK_ROWS - 1) });
    return list;
  });
  const total = targets.reduce((sum, target) => sum + target.count, 0);
  let done = 0;
  await inParallel(chunks, SEED_CONNECTIONS, async ({ target, from, to }) => {
    const created = CREATED[target.kind];
    await withClient(target.url, (client) => client.query(SEED_SQL, [from, to, target.count, target.salt, created.from, created.span, BENCH_TENANT, BENCH_OPERATION]));
    done += to - from + 1;
    if (chunks.length > 1) progress(done, total);
  });
}

/** Sets (or, for undefined, resets) server settings that a reload applies. */
async function configure(url: string, settings: Record<string, string | undefined>): Promise<void> {
  await withClient(url, async (client) => {
    for (const [name, value] of Object.entries(settings)) {
      await client.query(value === undefined ? `ALTER SYSTEM RESET ${name}` : `ALTER SYSTEM SET ${name} = '${value}'`);
    }
    await client.query('SELECT pg_reload_conf()');
  });
}

/** Finished records past `expires_at`: exactly what the reaper deletes. */
export async function countExpired(url: string): Promise<number> {
  return withClient(url, async (client) => {
    const { rows } = await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM idempotency_records WHERE expires_at <= now() AND status <> 'in_progress'`);
    return rows[0].n;
  });
}

/** Runs `work` on every item, at most `concurrency` at a time; rejects with the first failure once the running ones settle. */
async function inParallel<T>(items: readonly T[], concurrency: number, work: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  let failure: unknown;
  const worker = async () => {
    while (failure === undefined && next < items.length) {
      const item = items[next++];
      await work(item).catch((error: unknown) => (failure ??= error));
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
  if (failure !== undefined) throw failure;
}

function elapsed(since: number): string {
  return ((Date.now() - since) / 1000).toFixed(0);
}
