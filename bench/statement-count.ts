/**
 * `npm run bench:statements`: what one request sends PostgreSQL, route by
 * route, with node-postgres pipelining on and off. Requests go one at a
 * time, so every statement and round trip between two answers is that
 * request's. See bench/README.md.
 */
import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { BenchAppModule } from './bench-app.module.js';
import { createBenchDatabase } from './bench-database.js';
import { runBenchCommand } from './command-main.js';
import { type CountedStatements, StatementCounter } from './statement-counter.js';
import { ORDER_BODY } from './scenarios.js';
import { valueFlag, wholeNumber } from '../harness/command-line.js';

/** The routes counted: the two shapes of business code, bare and behind the module's default. */
const ROUTES = [
  { label: 'bare: order + Outbox.add()', path: '/bench/orders/bare' },
  { label: 'default: order + Outbox.add()', path: '/bench/orders/idempotent' },
  { label: 'bare: two inserts through IdempotencyTransactionHost.manager', path: '/bench/two-rows/bare' },
  { label: 'default: two inserts through IdempotencyTransactionHost.manager', path: '/bench/two-rows/idempotent' },
] as const;

const COMMAND_LINE = {
  command: 'npm run bench:statements --',
  flags: {
    requests: valueFlag({ placeholder: '<n>', description: 'requests per route and setting, after one unmeasured', default: '20', parse: wholeNumber() }),
  },
  footer: 'PostgreSQL: DATABASE_URL if set, else an embedded server started for the run.',
};

runBenchCommand({
  tag: 'statements',
  line: COMMAND_LINE,
  options: (values) => ({ requests: values.requests }),
  session: async ({ requests }, cleanup, log) => {
    const database = await createBenchDatabase(`statements${randomBytes(3).toString('hex')}`, log);
    cleanup.add('database', database.close);
    const counter = StatementCounter.install();
    const rows: Array<{ pipeline: boolean; label: string; counted: CountedStatements }> = [];
    for (const pipeline of [true, false]) {
      const app = await NestFactory.create(BenchAppModule.forRoot({ databaseUrl: database.url, pipeline, poolSize: 2, idempotency: { reaper: false } }), { logger: ['error', 'warn'] });
      await app.listen(0, '127.0.0.1');
      try {
        for (const route of ROUTES) rows.push({ pipeline, label: route.label, counted: await countRoute(app, route.path, requests, counter) });
      } finally {
        await app.close();
      }
    }
    console.log(formatTable(rows));
    return 0;
  },
});

/** Sends `requests` first executions to `path` one after another, and answers what each sent on average. */
async function countRoute(app: INestApplication, path: string, requests: number, counter: StatementCounter): Promise<CountedStatements> {
  const url = `${await app.getUrl()}${path}`;
  const send = async (key: string) => {
    const response = await fetch(url, { method: 'POST', body: ORDER_BODY, headers: { 'content-type': 'application/json', 'idempotency-key': key } });
    if (response.status !== 201) throw new Error(`${path} answered ${response.status}: ${await response.text()}`);
  };
  const run = randomBytes(4).toString('hex');
  await send(`${run}-warm`); // prepares the named statements and fills TypeORM's metadata caches
  counter.reset();
  for (let index = 0; index < requests; index++) await send(`${run}-${index}`);
  return counter.perRequest(requests);
}

function formatTable(rows: Array<{ pipeline: boolean; label: string; counted: CountedStatements }>): string {
  const kinds = [...new Set(rows.flatMap((row) => Object.keys(row.counted.byKind)))];
  const header = ['pipelining', 'route', 'statements', 'queries', 'round trips', ...kinds];
  const lines = rows.map((row) => [row.pipeline ? 'on' : 'off', row.label, fmt(row.counted.statements), fmt(row.counted.queries), fmt(row.counted.roundTrips), ...kinds.map((kind) => fmt(row.counted.byKind[kind] ?? 0))]);
  return [header, header.map(() => '---'), ...lines].map((cells) => `| ${cells.join(' | ')} |`).join('\n');
}

function fmt(value: number): string {
  return Number.isInteger(value) ? String(value) : value.toFixed(2);
}
