import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../../src/database/embedded-postgres.js';

/** The compiled demo (`npm test` builds first). */
const MAIN = resolve('dist/src/main.js');

/** The demo app running in a child process of its own, so that a test can kill it for real. */
export interface DemoProcess {
  url: string;
  child: ChildProcess;
  /** SIGKILL: no shutdown hook, no rollback from the app; PostgreSQL sees the connection drop. */
  kill(): Promise<void>;
  stop(): Promise<void>;
}

export async function startDemoProcess(env: Record<string, string>): Promise<DemoProcess> {
  const port = await freePort();
  const child = spawn(process.execPath, [MAIN], { env: { ...process.env, ...env, PORT: String(port) }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  const url = `http://127.0.0.1:${port}`;
  for (let attempt = 0; ; attempt++) {
    if (child.exitCode !== null) throw new Error(`demo exited with ${child.exitCode}: ${stderr}`);
    if (await fetch(`${url}/health`).then((r) => r.ok, () => false)) break;
    if (attempt > 300) throw new Error(`demo did not become healthy: ${stderr}`);
    await sleep(50);
  }
  const exited = once(child, 'exit');
  return {
    url,
    child,
    kill: async () => {
      child.kill('SIGKILL');
      await exited;
    },
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}
