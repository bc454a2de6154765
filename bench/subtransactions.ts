/**
 * `npm run bench:subtransactions`: what the units' savepoints cost a
 * streaming standby while a long transaction stays open on the primary. On
 * a primary and a standby of their own (harness/replica-pair.ts), pgbench
 * sends the default's first execution (bench/pgbench/guarded-first.sql: the
 * lock and read with BEGIN, the record with COMMIT) with a number of
 * business inserts between, each behind a savepoint as the module sends it
 * or without one (`unitSavepoints: false`), while a second pgbench reads the
 * newest orders on the standby. See bench/README.md.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { list, positiveNumber, valueFlag, wholeNumber } from '../harness/command-line.js';
import { ReplicaPair, replicaPairBinaries } from '../harness/replica-pair.js';
import { runBenchCommand } from './command-main.js';
import { migrate } from './growth-seeding.js';
import { median } from './statistics.js';
import { runWindow, type WindowResult } from './pgbench/pgbench-window.js';
import { PGBENCH_VARIABLES } from './pgbench/pgbench-variables.js';

const SCRIPT_FOLDER = fileURLToPath(new URL('../../bench/pgbench/', import.meta.url));
/** The business insert of guarded-first.sql, each unit's one statement here. */
const ORDER_INSERT = `INSERT INTO "orders"("id", "tenant", "sku", "quantity", "note", "status", "created_at") VALUES (DEFAULT, :tenant, :sku, :quantity, NULL, DEFAULT, DEFAULT) RETURNING "id", "status", "created_at";`;
/** What the standby's readers run: the newest `rows` orders, each checked against their snapshot. */
const reader = (rows: number) => `SELECT count(*) FROM (SELECT id FROM orders WHERE tenant = 'bench' ORDER BY seq DESC LIMIT ${rows}) AS newest;\n`;

const COMMAND_LINE = {
  command: 'npm run bench:subtransactions --',
  flags: {
    writes: valueFlag({ placeholder: '<list>', description: 'business inserts per request, one variant each (the module takes a savepoint per insert)', default: '2,80', parse: list }),
    window: valueFlag({ placeholder: '<s>', description: 'seconds of each window', default: '15', parse: positiveNumber() }),
    rounds: valueFlag({ placeholder: '<n>', description: 'rounds; each runs every variant once, in reverse every other round', default: '2', parse: wholeNumber() }),
    clients: valueFlag({ placeholder: '<n>', description: 'pgbench clients writing on the primary', default: '8', parse: wholeNumber() }),
    readers: valueFlag({ placeholder: '<n>', description: 'pgbench clients reading on the standby', default: '4', parse: wholeNumber() }),
    'reader-rows': valueFlag({
      placeholder: '<n>',
      description: 'the newest orders each read checks: past 65,536 transactions (32 pages of pg_subtrans), a suboverflowed snapshot misses its SLRU',
      default: '100',
      parse: wholeNumber(),
    }),
    port: valueFlag({ placeholder: '<n>', description: "the primary's port; the standby's is the next", default: '15532', parse: wholeNumber(1024, 65534) }),
  },
  footer: "Debian's PostgreSQL 15 binaries (POSTGRES_BIN_DIR for others) and pgbench on PATH.",
};

interface Variant {
  writes: number;
  savepoints: boolean;
  /** Whether a transaction with an xid stays open on the primary through the window. */
  longTransaction: boolean;
}

interface WindowRow extends Variant {
  round: number;
  primary: WindowResult;
  standby: WindowResult;
  /** pg_stat_slru's 'Subtrans' row over the window, per server. */
  subtransPrimary: SlruCounts;
  subtransStandby: SlruCounts;
}

type SlruCounts = Record<'blks_zeroed' | 'blks_hit' | 'blks_read' | 'blks_written', number>;

runBenchCommand({
  tag: 'subtransactions',
  line: COMMAND_LINE,
  options: (values) => ({ ...values, writes: values.writes.map((text) => wholeNumber()(text, 'writes')) }),
  session: async (options, cleanup, log) => {
    const binDir = replicaPairBinaries();
    if (!binDir) throw new Error('no initdb and pg_basebackup: install PostgreSQL 15 or set POSTGRES_BIN_DIR');
    const pair = await ReplicaPair.start({ primaryPort: options.port, standbyPort: options.port + 1, replication: 'asynchronous', binDir, settings: { max_connections: '100' }, log });
    cleanup.add('replica pair', () => pair.stop());
    await query(pair.primary.url(), 'CREATE DATABASE bench');
    const primaryUrl = pair.primary.url('bench');
    const standbyUrl = pair.standby.url('bench');
    await migrate(primaryUrl);
    const folder = await mkdtemp(join(tmpdir(), 'subtransactions-'));
    cleanup.add('scripts', () => rm(folder, { recursive: true, force: true }));
    const template = await readFile(`${SCRIPT_FOLDER}guarded-first.sql`, 'utf8');
    await writeFile(join(folder, 'reader.sql'), reader(options['reader-rows']));

    const variants: Variant[] = options.writes.flatMap((writes) => [
      { writes, savepoints: true, longTransaction: false },
      { writes, savepoints: true, longTransaction: true },
      { writes, savepoints: false, longTransaction: true },
    ]);
    const rows: WindowRow[] = [];
    for (let round = 1; round <= options.rounds; round++) {
      for (const variant of round % 2 ? variants : [...variants].reverse()) {
        const script = join(folder, `w${variant.writes}-${variant.savepoints ? 'savepoints' : 'plain'}.sql`);
        await writeFile(script, firstExecution(template, variant.writes, variant.savepoints));
        await caughtUp(pair);
        const row = await measure(variant, round, { primaryUrl, standbyUrl, script, reader: join(folder, 'reader.sql'), ...options });
        rows.push(row);
        log(windowLine(row));
      }
    }
    console.log(`\n${report(variants, rows)}`);
    return 0;
  },
});

/**
 * guarded-first.sql's first execution with `writes` order inserts where the
 * order and its outbox event were, each behind its own savepoint (the last
 * one's released before the next is taken, in the same pipeline) or not.
 */
function firstExecution(template: string, writes: number, savepoints: boolean): string {
  const head = template.slice(0, template.indexOf('\\endpipeline') + '\\endpipeline\n'.length);
  const tail = template.slice(template.lastIndexOf('\\startpipeline'));
  const units = Array.from({ length: writes }, (_, unit) => {
    if (!savepoints) return `${ORDER_INSERT}\n`;
    const release = unit > 0 ? 'RELEASE SAVEPOINT idempotency_unit;\n' : '';
    return `\\startpipeline\n${release}SAVEPOINT idempotency_unit;\n${ORDER_INSERT}\n\\endpipeline\n`;
  });
  return head + units.join('') + tail;
}

async function measure(
  variant: Variant,
  round: number,
  run: { primaryUrl: string; standbyUrl: string; script: string; reader: string; window: number; clients: number; readers: number },
): Promise<WindowRow> {
  const long = variant.longTransaction ? await openLongTransaction(run.primaryUrl) : undefined;
  try {
    await Promise.all([resetSubtrans(run.primaryUrl), resetSubtrans(run.standbyUrl)]);
    const [primary, standby] = await Promise.all([
      runWindow(run.primaryUrl, { script: run.script, mode: 'prepared', seconds: run.window, clients: run.clients, threads: 2, variables: { ...PGBENCH_VARIABLES, notify: 'false' } }),
      runWindow(run.standbyUrl, { script: run.reader, mode: 'prepared', seconds: run.window, clients: run.readers, threads: 1, variables: {} }),
    ]);
    // Backends report their SLRU counts when their transactions end, at most once a second.
    await sleep(1500);
    const [subtransPrimary, subtransStandby] = await Promise.all([subtrans(run.primaryUrl), subtrans(run.standbyUrl)]);
    return { ...variant, round, primary, standby, subtransPrimary, subtransStandby };
  } finally {
    await long?.end();
  }
}

/** A transaction with an xid of its own, open until `end()`: it holds every snapshot's xmin back, on the standby too. */
async function openLongTransaction(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query('BEGIN');
  await client.query('SELECT txid_current()');
  return client;
}

async function resetSubtrans(url: string): Promise<void> {
  await query(url, `SELECT pg_stat_reset_slru('Subtrans')`);
}

async function subtrans(url: string): Promise<SlruCounts> {
  const [row] = await query<Record<keyof SlruCounts, string>>(url, `SELECT blks_zeroed, blks_hit, blks_read, blks_written FROM pg_stat_slru WHERE name = 'Subtrans'`);
  return { blks_zeroed: Number(row.blks_zeroed), blks_hit: Number(row.blks_hit), blks_read: Number(row.blks_read), blks_written: Number(row.blks_written) };
}

/** Waits until the standby has replayed what the primary wrote so far, so no window starts with the last one's backlog. */
async function caughtUp(pair: ReplicaPair): Promise<void> {
  const [{ lsn }] = await query<{ lsn: string }>(pair.primary.url(), 'SELECT pg_current_wal_lsn()::text AS lsn');
  for (;;) {
    const [{ behind }] = await query<{ behind: boolean }>(pair.standby.url(), 'SELECT pg_last_wal_replay_lsn() < $1::pg_lsn AS behind', [lsn]);
    if (!behind) return;
    await sleep(200);
  }
}

async function query<Row = unknown>(url: string, sql: string, params: unknown[] = []): Promise<Row[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(sql, params)).rows as Row[];
  } finally {
    await client.end();
  }
}

function label({ writes, savepoints, longTransaction }: Variant): string {
  return `${writes} writes, ${savepoints ? 'savepoints' : 'no savepoints'}, ${longTransaction ? 'long transaction open' : 'no long transaction'}`;
}

function windowLine(row: WindowRow): string {
  return (
    `round ${row.round}, ${label(row)}: primary ${row.primary.tps.toFixed(0)} tps (p50 ${row.primary.p50Ms.toFixed(2)} ms); ` +
    `standby reads ${row.standby.tps.toFixed(0)} tps (p50 ${row.standby.p50Ms.toFixed(2)} ms); ` +
    `Subtrans SLRU primary hit ${row.subtransPrimary.blks_hit} read ${row.subtransPrimary.blks_read} zeroed ${row.subtransPrimary.blks_zeroed}, ` +
    `standby hit ${row.subtransStandby.blks_hit} read ${row.subtransStandby.blks_read} zeroed ${row.subtransStandby.blks_zeroed}`
  );
}

/** Per variant, the medians over rounds. */
function report(variants: readonly Variant[], rows: readonly WindowRow[]): string {
  const lines = [
    '| variant | primary tps | standby read tps | standby read p50 ms | standby Subtrans hits | standby Subtrans reads | primary Subtrans hits | primary Subtrans reads |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const variant of variants) {
    const of = rows.filter((row) => row.writes === variant.writes && row.savepoints === variant.savepoints && row.longTransaction === variant.longTransaction);
    const m = (pick: (row: WindowRow) => number) => median(of.map(pick));
    lines.push(
      `| ${label(variant)} | ${m((row) => row.primary.tps).toFixed(0)} | ${m((row) => row.standby.tps).toFixed(0)} | ${m((row) => row.standby.p50Ms).toFixed(2)} | ` +
        `${m((row) => row.subtransStandby.blks_hit)} | ${m((row) => row.subtransStandby.blks_read)} | ${m((row) => row.subtransPrimary.blks_hit)} | ${m((row) => row.subtransPrimary.blks_read)} |`,
    );
  }
  return lines.join('\n');
}
