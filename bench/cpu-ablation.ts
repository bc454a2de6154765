/**
 * `npm run bench:ablation`: the CPU a first execution costs, piece by piece,
 * from requests sent one at a time. Each piece is a comparison of two routes
 * that differ in it alone; blocks of requests on either alternate, and each
 * pair of neighbouring blocks gives a difference of app and PostgreSQL CPU µs
 * per request. One request at a time, a process's CPU time counts its own
 * work only, not the time other work on the machine took the CPU from it, so
 * the differences survive a busy machine better than throughput does. See
 * bench/README.md.
 */
import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import pg from 'pg';
import { valueFlag, wholeNumber } from '../harness/command-line.js';
import { BenchAppModule, type BenchAppOptions } from './bench-app.module.js';
import { createBenchDatabase } from './bench-database.js';
import { runBenchCommand } from './command-main.js';
import { spreadOf, type Spread } from './paired-statistics.js';
import { ORDER_BODY } from './scenarios.js';

/** The apps, by what differs from the bench app's defaults (pipelined, every module default). */
const APPS = {
  main: {},
  'no-savepoints': { idempotency: { unitSavepoints: false } },
  unpipelined: { pipeline: false },
} satisfies Record<string, Pick<BenchAppOptions, 'idempotency' | 'pipeline'>>;

type AppName = keyof typeof APPS;
interface Route {
  app: AppName;
  path: string;
}

/** Each piece: the route with it, and the route without it. */
const PIECES: ReadonlyArray<{ piece: string; with: Route; without: Route }> = [
  { piece: "Nest's interceptor chain", with: { app: 'main', path: '/bench/orders/intercepted' }, without: { app: 'main', path: '/bench/orders/bare' } },
  { piece: 'the default, all told (order + Outbox.add())', with: { app: 'main', path: '/bench/orders/idempotent' }, without: { app: 'main', path: '/bench/orders/bare' } },
  { piece: 'the default, all told (two inserts)', with: { app: 'main', path: '/bench/two-rows/idempotent' }, without: { app: 'main', path: '/bench/two-rows/bare' } },
  { piece: "the units' savepoints (two inserts)", with: { app: 'main', path: '/bench/two-rows/idempotent' }, without: { app: 'no-savepoints', path: '/bench/two-rows/idempotent' } },
  { piece: 'the default, all told, without pipelining (two inserts)', with: { app: 'unpipelined', path: '/bench/two-rows/idempotent' }, without: { app: 'unpipelined', path: '/bench/two-rows/bare' } },
];

const COMMAND_LINE = {
  command: 'npm run bench:ablation --',
  flags: {
    pairs: valueFlag({ placeholder: '<n>', description: 'pairs of blocks per piece, every other one in reverse', default: '12', parse: wholeNumber() }),
    block: valueFlag({ placeholder: '<n>', description: 'requests per block, sent one at a time', default: '200', parse: wholeNumber() }),
  },
  footer: 'PostgreSQL: DATABASE_URL if set, else an embedded server started for the run; its backends must be readable in /proc.',
};

runBenchCommand({
  tag: 'ablation',
  line: COMMAND_LINE,
  options: (values) => values,
  session: async ({ pairs, block }, cleanup, log) => {
    const database = await createBenchDatabase(`ablation${randomBytes(3).toString('hex')}`, log);
    cleanup.add('database', database.close);
    const apps = {} as Record<AppName, INestApplication>;
    for (const [name, options] of Object.entries(APPS) as Array<[AppName, (typeof APPS)[AppName]]>) {
      const app = await NestFactory.create(BenchAppModule.forRoot({ databaseUrl: database.url, poolSize: 1, ...options, idempotency: { reaper: false, ...('idempotency' in options ? options.idempotency : {}) } }), {
        logger: ['error'],
      });
      await app.listen(0, '127.0.0.1');
      cleanup.add(`app ${name}`, () => app.close());
      apps[name] = app;
    }
    const backends = new pg.Client({ connectionString: database.url });
    await backends.connect();
    cleanup.add('backend reader', () => backends.end());
    const run = randomBytes(4).toString('hex');
    let sent = 0;
    /** App and PostgreSQL CPU µs per request over a block of `block` first executions of `route`. */
    const measureBlock = async (route: Route) => {
      const url = `${await apps[route.app].getUrl()}${route.path}`;
      const pids = (await backends.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)).rows.map((row) => row.pid);
      const [appBefore, pgBefore] = [process.cpuUsage(), await backendMicros(pids)];
      for (let index = 0; index < block; index++) {
        const response = await fetch(url, { method: 'POST', body: ORDER_BODY, headers: { 'content-type': 'application/json', 'idempotency-key': `${run}-${sent++}` } });
        if (response.status !== 201) throw new Error(`${route.path} answered ${response.status}: ${await response.text()}`);
      }
      const appUsed = process.cpuUsage(appBefore);
      return { app: (appUsed.user + appUsed.system) / block, postgres: ((await backendMicros(pids)) - pgBefore) / block };
    };
    // Once each, unmeasured: the JIT, TypeORM's metadata, the named statements of each connection.
    for (const route of PIECES.flatMap((piece) => [piece.with, piece.without])) await measureBlock(route);
    const rows: Array<{ piece: string; app: Spread | undefined; postgres: Spread | undefined }> = [];
    for (const piece of PIECES) {
      const app: number[] = [];
      const postgres: number[] = [];
      for (let pair = 0; pair < pairs; pair++) {
        const first = pair % 2 ? piece.without : piece.with;
        const measured = new Map<Route, { app: number; postgres: number }>();
        measured.set(first, await measureBlock(first));
        const second = first === piece.with ? piece.without : piece.with;
        measured.set(second, await measureBlock(second));
        app.push(measured.get(piece.with)!.app - measured.get(piece.without)!.app);
        postgres.push(measured.get(piece.with)!.postgres - measured.get(piece.without)!.postgres);
      }
      rows.push({ piece: piece.piece, app: spreadOf(app), postgres: spreadOf(postgres) });
      log(`${piece.piece}: app ${format(rows[rows.length - 1].app)}, PostgreSQL ${format(rows[rows.length - 1].postgres)} µs per request`);
    }
    console.log(['', '| piece | app CPU µs (95% interval) | PostgreSQL CPU µs (95% interval) |', '| --- | ---: | ---: |', ...rows.map((row) => `| ${row.piece} | ${format(row.app)} | ${format(row.postgres)} |`)].join('\n'));
    return 0;
  },
});

/** The CPU time, in µs, the processes `pids` have used so far, from /proc (utime + stime, in clock ticks of 10 ms). */
async function backendMicros(pids: readonly number[]): Promise<number> {
  let ticks = 0;
  for (const pid of pids) {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
    if (!stat) continue;
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    ticks += Number(fields[11]) + Number(fields[12]);
  }
  return ticks * 10_000;
}

function format(spread: Spread | undefined): string {
  if (!spread) return '–';
  const sign = (value: number) => `${value >= 0 ? '+' : '−'}${Math.abs(value).toFixed(0)}`;
  return `${sign(spread.median)} (${sign(spread.low)} to ${sign(spread.high)})`;
}
