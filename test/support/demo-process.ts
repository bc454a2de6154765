import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/** The compiled demo and worker (`npm test` builds first). */
const MAIN = { name: 'demo', script: resolve('dist/src/demo/main.js') };
const WORKER = { name: 'worker', script: resolve('dist/src/demo/worker.js') };

/** A demo process (the app or the worker) in a child process of its own, so that a test can kill it for real. */
export interface ChildDemo {
  child: ChildProcess;
  /** Everything it wrote to stdout and stderr so far. */
  output(): string;
  /** SIGKILL: no shutdown hook, no rollback from the app; PostgreSQL sees the connection drop. */
  kill(): Promise<void>;
  stop(): Promise<void>;
}

/** The demo app, serving HTTP at `url`. */
export interface DemoProcess extends ChildDemo {
  url: string;
}

export async function startDemoProcess(env: Record<string, string>): Promise<DemoProcess> {
  // PORT=0 lets the demo bind a free port itself, and say which: a port probed here could be taken meanwhile.
  const { demo, ready } = await startUntil(MAIN, { ...env, PORT: '0' }, /listening on (http:\/\/[\d.:]+)/);
  return { ...demo, url: ready[1] };
}

/** `npm run worker`: the relay and the fulfilment consumer without HTTP, once it says it runs. */
export async function startWorkerProcess(env: Record<string, string>): Promise<ChildDemo> {
  return (await startUntil(WORKER, env, /Worker running/)).demo;
}

async function startUntil({ name, script }: { name: string; script: string }, env: Record<string, string>, readyLine: RegExp): Promise<{ demo: ChildDemo; ready: RegExpExecArray }> {
  // Delivery runs only where a suite asks for it: an inherited NATS_URL (CI exports one) would start a
  // relay and a consumer whose records and shipments appear while other suites count theirs.
  const { NATS_URL: _inherited, ...inherited } = process.env;
  const child = spawn(process.execPath, [script], { env: { ...inherited, ...env, NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  let ready: RegExpExecArray | null = null;
  for (let attempt = 0; !ready; attempt++) {
    if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode}: ${output}`);
    if (attempt > 2400) throw new Error(`${name} did not start within 60 s: ${output}`);
    ready = readyLine.exec(output);
    if (!ready) await sleep(25);
  }
  const exited = once(child, 'exit');
  const demo: ChildDemo = {
    child,
    output: () => output,
    kill: async () => {
      child.kill('SIGKILL');
      await exited;
    },
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
  return { demo, ready };
}
