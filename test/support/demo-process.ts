import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/** The compiled demo (`npm test` builds first). */
const MAIN = resolve('dist/src/demo/main.js');

/** The demo app running in a child process of its own, so that a test can kill it for real. */
export interface DemoProcess {
  url: string;
  child: ChildProcess;
  /** SIGKILL: no shutdown hook, no rollback from the app; PostgreSQL sees the connection drop. */
  kill(): Promise<void>;
  stop(): Promise<void>;
}

export async function startDemoProcess(env: Record<string, string>): Promise<DemoProcess> {
  // PORT=0 lets the demo bind a free port itself, and say which: a port probed here could be taken meanwhile.
  // Delivery runs only where a suite asks for it: an inherited NATS_URL (CI exports one) would start a
  // relay and a consumer whose records and shipments appear while other suites count theirs.
  const { NATS_URL: _inherited, ...inherited } = process.env;
  const child = spawn(process.execPath, [MAIN], { env: { ...inherited, ...env, PORT: '0', NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  let url: string | undefined;
  for (let attempt = 0; !url; attempt++) {
    if (child.exitCode !== null) throw new Error(`demo exited with ${child.exitCode}: ${output}`);
    if (attempt > 2400) throw new Error(`demo did not start within 60 s: ${output}`);
    url = /listening on (http:\/\/[\d.:]+)/.exec(output)?.[1];
    if (!url) await sleep(25);
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
