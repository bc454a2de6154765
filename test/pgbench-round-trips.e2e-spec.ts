import 'reflect-metadata';
import { readFileSync } from 'node:fs';
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { BenchAppModule, type BenchAppOptions } from '../bench/bench-app.module.js';
import { ORDER_BODY } from '../bench/scenarios.js';
import { StatementCounter } from '../bench/statement-counter.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

/**
 * bench/pgbench's scripts stand for what the module sends, in the round
 * trips it sends it in (a `\startpipeline` block where it pipelines): the
 * bench app's routes counted at node-postgres, against the scripts' own
 * statements and round trips. When the module sends a statement more, or
 * pipelines differently, `npm run bench:pgbench` no longer measures it.
 */
describe('the pgbench scripts, round trip by round trip', () => {
  let db: TestDatabase;
  const counter = StatementCounter.install();
  const apps: INestApplication[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    for (const app of apps) await app.close();
    await db?.drop();
  });

  /** What one first execution of `path` sends, on a pipelined app with `idempotency` options. */
  async function sent(path: string, idempotency: BenchAppOptions['idempotency'] = {}): Promise<{ statements: number; roundTrips: number }> {
    const app = await NestFactory.create(BenchAppModule.forRoot({ databaseUrl: db.url, pipeline: true, poolSize: 2, idempotency: { reaper: false, ...idempotency } }), { logger: false });
    apps.push(app);
    await app.listen(0, '127.0.0.1');
    const post = async (key: string) => {
      const response = await fetch(`${await app.getUrl()}${path}`, { method: 'POST', body: ORDER_BODY, headers: { 'content-type': 'application/json', 'idempotency-key': key } });
      expect(response.status).toBe(201);
    };
    await post(`warm-${Date.now()}`);
    counter.reset();
    await post(`counted-${Date.now()}`);
    const { statements, roundTrips } = counter.perRequest(1);
    return { statements, roundTrips };
  }

  it.each([
    ['bare', '/bench/orders/bare', undefined],
    ['guarded-first-units', '/bench/orders/idempotent', undefined],
    ['guarded-first', '/bench/orders/idempotent', { unitSavepoints: false }],
  ] as const)('%s.sql sends what %s sends, in as many round trips', async (script, path, options) => {
    expect(scriptShape(script)).toEqual(await sent(path, options));
  });
});

/** A script's statements, and its round trips: one per pipeline block, one per statement outside them. */
function scriptShape(name: string): { statements: number; roundTrips: number } {
  const lines = readFileSync(new URL(`../bench/pgbench/${name}.sql`, import.meta.url), 'utf8').split('\n');
  let statements = 0;
  let roundTrips = 0;
  let inPipeline = false;
  for (const line of lines.map((text) => text.trim())) {
    if (line === '\\startpipeline') {
      inPipeline = true;
      roundTrips++;
    } else if (line === '\\endpipeline') {
      inPipeline = false;
    } else if (!line.startsWith('--') && !line.startsWith('\\') && line.endsWith(';')) {
      statements++;
      if (!inPipeline) roundTrips++;
    }
  }
  return { statements, roundTrips };
}
