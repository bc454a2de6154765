import { fileURLToPath } from 'node:url';
import { SupervisedProcess } from '../harness/supervised-process.js';
import type { BenchAppOptions } from './bench-app.module.js';
import type { AllocationRecording } from './heap-allocations.js';
import type { AppAllocations, AppCpu, AppReady, LoadJob, LoadReply, LoadRequest, LoadTarget, PhaseResult } from './load-protocol.js';

/** How long the app may take to run its migrations and listen. */
const APP_START_TIMEOUT_MS = 60_000;
/** How long the app may take to answer a CPU reading. */
const CPU_TIMEOUT_MS = 10_000;
/** How long the app may take to start or stop recording allocations (stopping builds the sampled profile). */
const ALLOCATIONS_TIMEOUT_MS = 60_000;

/** The bench app, listening at `url`. */
export interface BenchAppProcess {
  process: SupervisedProcess;
  url: string;
  /** The app process's own CPU time so far (user + system), in µs. */
  cpuMicros(): Promise<number>;
  /** Starts recording the app's allocations (heap-allocations.ts). */
  startAllocations(samplingInterval: number): Promise<void>;
  /** Stops recording: what the app allocated since the start. */
  stopAllocations(): Promise<AllocationRecording>;
}

/** How long the load generator may take to answer a request of a paired run (closing waits for autocannon's next tick). */
const STEER_TIMEOUT_MS = 10_000;

/** The load generator: one job at a time, or one open load that a paired run steers. */
export interface LoadGeneratorProcess {
  process: SupervisedProcess;
  run(job: LoadJob, timeoutMs: number): Promise<PhaseResult[]>;
  /** Opens connections that keep sending to `target` until `close()`. */
  open(url: string, body: string, connections: number, target: LoadTarget): Promise<void>;
  /** The open load's next requests go to `target`. */
  aim(target: LoadTarget): Promise<void>;
  /** What the open load was answered since its last tally. */
  tally(name: PhaseResult['name']): Promise<PhaseResult>;
  close(): Promise<void>;
}

/**
 * Forks the compiled bench app and waits until it listens. With
 * `BENCH_CPU_PROF_DIR` set, the app writes a V8 CPU profile there when it exits.
 */
export async function startBenchApp(options: BenchAppOptions): Promise<BenchAppProcess> {
  const profileDir = process.env.BENCH_CPU_PROF_DIR;
  const child = sibling('bench-app.js', [JSON.stringify(options)], profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []);
  try {
    const ready = await child.nextMessage((message): message is AppReady => (message as AppReady)?.type === 'listening', APP_START_TIMEOUT_MS, 'the bench app to listen');
    return {
      process: child,
      url: `http://127.0.0.1:${ready.port}`,
      cpuMicros: async () => {
        const answer = child.nextMessage((message): message is AppCpu => (message as AppCpu)?.type === 'cpu', CPU_TIMEOUT_MS, 'the bench app\'s CPU time');
        child.child.send({ type: 'cpu' });
        return (await answer).micros;
      },
      startAllocations: async (samplingInterval) => void (await askAllocations(child, { type: 'allocations-start', samplingInterval })),
      stopAllocations: async () => {
        const reply = await askAllocations(child, { type: 'allocations-stop' });
        if (reply.type !== 'allocations-recorded') throw new Error(`the bench app answered ${reply.type} to allocations-stop`);
        return reply.recording;
      },
    };
  } catch (error) {
    await child.stop();
    throw error;
  }
}

/** Sends an allocations request to the bench app and waits for its answer; throws with the app's message when it failed. */
async function askAllocations(child: SupervisedProcess, request: { type: 'allocations-start'; samplingInterval: number } | { type: 'allocations-stop' }): Promise<AppAllocations> {
  const isAnswer = (message: unknown): message is AppAllocations => ['allocations-started', 'allocations-recorded', 'allocations-failed'].includes((message as AppAllocations)?.type);
  const answer = child.nextMessage(isAnswer, ALLOCATIONS_TIMEOUT_MS, "the bench app's allocations");
  child.child.send(request);
  const reply = await answer;
  if (reply.type === 'allocations-failed') throw new Error(`bench app: ${reply.message}`);
  return reply;
}

/** Forks the compiled load generator. */
export function startLoadGenerator(): LoadGeneratorProcess {
  const child = sibling('load-generator.js', [], []);
  const ask = async (request: LoadRequest, timeoutMs = STEER_TIMEOUT_MS): Promise<PhaseResult[]> => {
    const reply = child.nextMessage((message): message is LoadReply => ['result', 'done', 'failed'].includes((message as LoadReply)?.type), timeoutMs, 'the load generator');
    child.child.send(request);
    const answer = await reply;
    if (answer.type === 'failed') throw new Error(`load generator: ${answer.message}`);
    return answer.type === 'result' ? answer.phases : [];
  };
  return {
    process: child,
    run: (job, timeoutMs) => ask({ type: 'run', job }, timeoutMs),
    open: async (url, body, connections, target) => void (await ask({ type: 'open', url, body, connections, target })),
    aim: async (target) => void (await ask({ type: 'aim', target })),
    tally: async (name) => (await ask({ type: 'tally', name }))[0],
    close: async () => void (await ask({ type: 'close' })),
  };
}

/** A script compiled next to this file in dist/bench/, with an IPC channel and the runner's output. */
function sibling(script: string, args: string[], execArgv: string[]): SupervisedProcess {
  return new SupervisedProcess({ script: fileURLToPath(new URL(script, import.meta.url)), args, execArgv, ipc: true, output: 'inherit' });
}
