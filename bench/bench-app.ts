/**
 * The bench app process, forked by the bench runner with its options as JSON
 * in argv[2]. It listens on a free loopback port and reports the port over IPC.
 */
import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import type { AppCpu, AppCpuRequest, AppReady } from './load-protocol.js';
import { BenchAppModule, type BenchAppOptions } from './bench-app.module.js';

async function main(): Promise<void> {
  const options = JSON.parse(process.argv[2] ?? '{}') as BenchAppOptions;
  if (!options.databaseUrl) throw new Error('bench-app: pass the options as JSON, with databaseUrl');
  const app = await NestFactory.create(BenchAppModule.forRoot(options), { logger: ['error', 'warn'] });
  await app.listen(0, '127.0.0.1');
  const address = app.getHttpServer().address() as { port: number };

  let closing = false;
  const shutdown = () => {
    if (closing) return;
    closing = true;
    app.close().then(
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

  const ready: AppReady = { type: 'listening', port: address.port };
  process.send?.(ready);
}

main().catch((error: unknown) => {
  console.error('bench-app failed to start:', error);
  process.exit(1);
});
