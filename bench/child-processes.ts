import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { BenchAppOptions } from './bench-app.module.js';
import type { AppReady, LoadJob, LoadReply, PhaseResult } from './load-protocol.js';

/** How long the app may take to run its migrations and listen. */
const APP_START_TIMEOUT_MS = 60_000;
/** How long a child may take to close after SIGTERM before it is killed. */
const STOP_GRACE_MS = 5_000;

/** A child process of the runner. `exited` settles when it ends, however it ends. */
export interface Child {
  process: ChildProcess;
  exited: Promise<number | null>;
  /** SIGTERM, then SIGKILL after a grace period. Safe to call twice. */
  stop(): Promise<void>;
}

/** The bench app, listening at `url`. */
export interface BenchAppProcess extends Child {
  url: string;
}

/** The load generator: one job at a time. */
export interface LoadGeneratorProcess extends Child {
  run(job: LoadJob, timeoutMs: number): Promise<PhaseResult[]>;
}

/**
 * Forks the compiled bench app and waits until it listens. With
 * `BENCH_CPU_PROF_DIR` set, the app writes a V8 CPU profile there when it exits.
 */
export async function startBenchApp(options: BenchAppOptions): Promise<BenchAppProcess> {
  const profileDir = process.env.BENCH_CPU_PROF_DIR;
  const child = forkSibling('bench-app.js', [JSON.stringify(options)], profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []);
  try {
    const ready = await nextMessage<AppReady>(child, (message) => (message as AppReady)?.type === 'listening', APP_START_TIMEOUT_MS, 'the bench app to listen');
    return { ...child, url: `http://127.0.0.1:${ready.port}` };
  } catch (error) {
    await child.stop();
    throw error;
  }
}

/** Forks the compiled load generator. */
export function startLoadGenerator(): LoadGeneratorProcess {
  const child = forkSibling('load-generator.js', [], []);
  return {
    ...child,
    run: async (job, timeoutMs) => {
      const reply = nextMessage<LoadReply>(child, (message) => ['result', 'failed'].includes((message as LoadReply)?.type), timeoutMs, 'the load generator');
      child.process.send({ type: 'run', job });
      const answer = await reply;
      if (answer.type === 'failed') throw new Error(`load generator: ${answer.message}`);
      return answer.phases;
    },
  };
}

function forkSibling(script: string, args: string[], execArgv: string[]): Child {
  // Compiled next to this file in dist/bench/; no inherited --inspect or loader flags.
  const child = fork(fileURLToPath(new URL(script, import.meta.url)), args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let stopping: Promise<void> | undefined;
  const stop = () => (stopping ??= stopProcess(child, exited));
  return { process: child, exited, stop };
}

async function stopProcess(child: ChildProcess, exited: Promise<number | null>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
  await exited;
  clearTimeout(timer);
}

/** The child's next message that `accept`s, or a rejection when it exits first or `timeoutMs` passes. */
function nextMessage<T>(child: Child, accept: (message: unknown) => boolean, timeoutMs: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onMessage = (message: unknown) => {
      if (!accept(message)) return;
      done();
      resolve(message as T);
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
    }, timeoutMs);
    const done = () => {
      clearTimeout(timer);
      child.process.off('message', onMessage);
    };
    child.process.on('message', onMessage);
    child.exited.then((code) => {
      done();
      reject(new Error(`${what}: the process exited (code ${code}) first`));
    });
  });
}
