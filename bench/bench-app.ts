/**
 * The bench app process, forked by the bench runner with its options as JSON
 * in argv[2]. It listens on a free loopback port and reports the port over IPC.
 */
import 'reflect-metadata';
import { createServer, type RequestListener } from 'node:http';
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DataSource } from 'typeorm';
import type { AppAllocations, AppAllocationsRequest, AppCpu, AppCpuRequest, AppReady } from './load-protocol.js';
import { BenchAppModule, type BenchAppOptions } from './bench-app.module.js';
import { AllocationRecorder } from './heap-allocations.js';

const LOGGER = ['error', 'warn'] as const;

/** An app mounted beside the main one: it answers the requests whose path starts with `prefix`. */
interface MountedApp {
  prefix: string;
  app: INestApplication;
  handle: RequestListener;
}

async function main(): Promise<void> {
  const options = JSON.parse(process.argv[2] ?? '{}') as BenchAppOptions;
  if (!options.databaseUrl) throw new Error('bench-app: pass the options as JSON, with databaseUrl');
  const app = await NestFactory.create(BenchAppModule.forRoot(options), { logger: [...LOGGER] });
  await app.init();
  const mounted = await mountBeside(app, options);
  const handleMain = app.getHttpAdapter().getInstance() as RequestListener;
  // One server for every app, so the load generator's connections reach each of them.
  const server = createServer((request, response) => {
    const handle = mounted.find((beside) => request.url?.startsWith(beside.prefix))?.handle ?? handleMain;
    handle(request, response);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address() as { port: number };

  let closing = false;
  const shutdown = () => {
    if (closing) return;
    closing = true;
    // The mounted apps first: the main app's TypeOrmModule closes the DataSource they use.
    new Promise((resolve) => server.close(resolve))
      .then(() => Promise.all(mounted.map((beside) => beside.app.close())))
      .then(() => app.close())
      .then(
        () => process.exit(0),
        () => process.exit(1),
      );
  };
  // SIGTERM from the runner, Ctrl-C to the process group, or a runner that died.
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);
  process.once('disconnect', shutdown);

  // The runner reads this process's CPU time before and after each measured phase.
  process.on('message', (message: AppCpuRequest) => {
    if (message?.type !== 'cpu') return;
    const { user, system } = process.cpuUsage();
    const reply: AppCpu = { type: 'cpu', micros: user + system };
    process.send?.(reply);
  });

  // bench:allocations records what stretches of load allocate here (heap-allocations.ts).
  const allocations = new AllocationRecorder();
  process.on('message', (message: AppAllocationsRequest) => {
    if (message?.type !== 'allocations-start' && message?.type !== 'allocations-stop') return;
    const work: Promise<AppAllocations> =
      message.type === 'allocations-start'
        ? allocations.start(message.samplingInterval).then(() => ({ type: 'allocations-started' }))
        : allocations.stop().then((recording) => ({ type: 'allocations-recorded', recording }));
    void work.then(
      (reply) => process.send?.(reply),
      (error: unknown) => process.send?.({ type: 'allocations-failed', message: String(error) } satisfies AppAllocations),
    );
  });

  const ready: AppReady = { type: 'listening', port: address.port };
  process.send?.(ready);
}

/** The apps of `options.mounted`, each under its prefix, on the main app's DataSource. */
async function mountBeside(app: INestApplication, options: BenchAppOptions): Promise<MountedApp[]> {
  const mounted: MountedApp[] = [];
  for (const [prefix, idempotency] of Object.entries(options.mounted ?? {})) {
    const beside = await NestFactory.create(
      BenchAppModule.forRoot({ databaseUrl: options.databaseUrl, idempotency: { ...idempotency, reaper: false } }, app.get(DataSource)),
      { logger: [...LOGGER] },
    );
    beside.setGlobalPrefix(prefix);
    await beside.init();
    mounted.push({ prefix: `/${prefix}/`, app: beside, handle: beside.getHttpAdapter().getInstance() as RequestListener });
  }
  return mounted;
}

main().catch((error: unknown) => {
  console.error('bench-app failed to start:', error);
  process.exit(1);
});
