/**
 * `node dist/bench/app-cpu.js`: the bench app's own CPU time per request, by
 * route, for a fixed number of requests: what `@Idempotent()` costs the app
 * process, apart from PostgreSQL, Redis and the load generator. The app is a
 * child process; around each batch it reports the CPU time of its main
 * thread (Linux's schedstat, in ns), where the JavaScript runs, and of the
 * whole process (`process.cpuUsage()`, which adds GC and libuv threads: those
 * inflate most when other work shares the CPUs). CPU time moves far less
 * than throughput with other work on the machine, but it still moves: read
 * the ratios within one run. Prints the median over rounds of µs per
 * request, and each route's excess over `bare` (first executions) or `floor`
 * (replays).
 *
 *   DATABASE_URL=postgres://... node dist/bench/app-cpu.js [--rounds 7] [--requests 2000] [--connections 8] [--no-peer]
 *   ... --profile <dir> --only replay    # the app writes a V8 CPU profile there when it exits
 */
import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { type ChildProcess, fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { BenchAppModule, type BenchAppOptions } from './bench-app.module.js';
import { createBenchDatabase } from './bench-database.js';

interface Route {
  id: string;
  path: string;
  /** Replays cycle keys completed beforehand; the others send a fresh key per request. */
  replay: boolean;
  peer?: boolean;
}

const ROUTES: readonly Route[] = [
  { id: 'floor', path: '/bench/floor', replay: false },
  { id: 'bare', path: '/bench/orders/bare', replay: false },
  { id: 'first', path: '/bench/orders/idempotent', replay: false },
  { id: 'replay', path: '/bench/orders/idempotent', replay: true },
  { id: 'peer-first', path: '/bench/peer/orders', replay: false, peer: true },
  { id: 'peer-replay', path: '/bench/peer/orders', replay: true, peer: true },
];

const BODY = JSON.stringify({ sku: 'bench-sku-1', quantity: 2 });
/** Distinct keys each replay route cycles through. */
const REPLAY_KEYS = 200;

if (process.argv[2] === '--app') void serveApp(JSON.parse(process.argv[3]) as BenchAppOptions);
else void main();

/** The app's side: the bench app, answering `cpu` messages with its CPU time so far. */
async function serveApp(options: BenchAppOptions): Promise<void> {
  const app = await NestFactory.create(BenchAppModule.forRoot(options), { logger: ['error', 'warn'] });
  await app.listen(0, '127.0.0.1');
  process.on('message', (message) => {
    if (message === 'cpu') process.send!({ cpu: cpuNow() });
    if (message === 'exit') void app.close().then(() => process.exit(0));
  });
  process.send!({ port: (app.getHttpServer().address() as { port: number }).port });
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rounds: { type: 'string', default: '7' },
      requests: { type: 'string', default: '2000' },
      connections: { type: 'string', default: '8' },
      only: { type: 'string' },
      profile: { type: 'string' },
      'no-peer': { type: 'boolean', default: false },
      'redis-url': { type: 'string', default: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' },
    },
  });
  const only = values.only?.split(',');
  const routes = ROUTES.filter((route) => (!only || only.includes(route.id)) && !(route.peer && values['no-peer']));
  const [rounds, requests, connections] = [values.rounds, values.requests, values.connections].map(Number);
  const runId = randomBytes(4).toString('hex');
  const database = await createBenchDatabase(runId, console.log);
  const options: BenchAppOptions = { databaseUrl: database.url, ...(routes.some((route) => route.peer) && { peer: { redisUrl: values['redis-url'], keyPrefix: `app-cpu-${runId}:` } }) };
  const app = fork(fileURLToPath(import.meta.url), ['--app', JSON.stringify(options)], { execArgv: values.profile ? ['--cpu-prof', `--cpu-prof-dir=${values.profile}`] : [] });
  try {
    const { port } = await reply<{ port: number }>(app, 'port');
    const agent = new Agent({ keepAlive: true, maxSockets: connections });
    const send = (path: string, key: string) => post(agent, port, path, key);
    for (const route of routes.filter((candidate) => candidate.replay)) {
      await inParallel(REPLAY_KEYS, connections, (i) => send(route.path, `${runId}-${route.id}-${i}`));
    }
    const perRequest = new Map<string, Array<{ main: number; process: number }>>(routes.map((route) => [route.id, []]));
    let fresh = 0;
    // One unmeasured round warms the JIT; rounds interleave the routes, so drift on the machine spreads over all.
    for (let round = 0; round <= rounds; round++) {
      for (const route of routes) {
        const key = (i: number) => (route.replay ? `${runId}-${route.id}-${i % REPLAY_KEYS}` : `${runId}-fresh-${fresh++}`);
        const before = await cpuOf(app);
        await inParallel(requests, connections, (i) => send(route.path, key(i)));
        const after = await cpuOf(app);
        if (round > 0) perRequest.get(route.id)!.push({ main: (after.main - before.main) / requests, process: (after.process - before.process) / requests });
      }
    }
    agent.destroy();
    console.log(`app CPU µs per request: median of ${rounds} rounds of ${requests} requests, ${connections} connections`);
    for (const thread of ['main', 'process'] as const) {
      console.log(thread === 'main' ? 'main thread' : 'whole process');
      const medians = new Map([...perRequest].map(([id, samples]) => [id, median(samples.map((sample) => sample[thread]))]));
      for (const route of routes) {
        const value = medians.get(route.id)!;
        const base = medians.get(route.replay ? 'floor' : 'bare');
        const excess = base === undefined || route.id === 'floor' || route.id === 'bare' ? '' : `${signed(value - base)} vs ${route.replay ? 'floor' : 'bare'}`;
        const samples = perRequest.get(route.id)!.map((sample) => sample[thread].toFixed(0)).join(' ');
        console.log(`  ${route.id.padEnd(12)} ${value.toFixed(0).padStart(5)}  ${excess.padEnd(14)}  rounds: ${samples}`);
      }
    }
  } finally {
    app.send('exit');
    await new Promise((resolve) => app.once('exit', resolve));
    await database.close();
  }
}

/** Sends `count` requests, `connections` at a time. */
async function inParallel(count: number, connections: number, send: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await send(next++);
  };
  await Promise.all(Array.from({ length: connections }, worker));
}

function post(agent: Agent, port: number, path: string, key: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const sent = request({ agent, port, host: '127.0.0.1', path, method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': key } }, (response) => {
      response.resume();
      response.on('end', () => (response.statusCode === 201 ? resolve() : reject(new Error(`${path}: status ${response.statusCode}`))));
    });
    sent.on('error', reject);
    sent.end(BODY);
  });
}

/** CPU time so far, in µs: the main thread's (where schedstat is, else the process's) and the process's. */
interface CpuTime {
  main: number;
  process: number;
}

function cpuNow(): CpuTime {
  const usage = process.cpuUsage();
  const all = usage.user + usage.system;
  try {
    return { main: Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]) / 1000, process: all };
  } catch {
    return { main: all, process: all };
  }
}

async function cpuOf(app: ChildProcess): Promise<CpuTime> {
  app.send('cpu');
  return (await reply<{ cpu: CpuTime }>(app, 'cpu')).cpu;
}

function reply<T>(child: ChildProcess, field: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: Record<string, unknown>) => {
      if (!(field in message)) return;
      child.off('message', onMessage);
      child.off('exit', onExit);
      resolve(message as T);
    };
    const onExit = (code: number | null) => reject(new Error(`the app exited (${code})`));
    child.on('message', onMessage);
    child.once('exit', onExit);
  });
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

function signed(value: number): string {
  return `${value >= 0 ? '+' : ''}${value.toFixed(0)}`;
}
