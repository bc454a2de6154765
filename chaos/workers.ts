import { createWriteStream, type WriteStream } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { SupervisedProcess } from '../harness/supervised-process.js';

/** The compiled demo worker; this file is compiled to dist/chaos/. */
const WORKER_MAIN = fileURLToPath(new URL('../src/demo/worker.js', import.meta.url));
const RESTART_PAUSE_MS = 200;
const TAIL_LINES = 20;

export type WorkerRole = 'relay' | 'consumer';

/** A worker exit: a fault it injected itself (the line it wrote says which), or a crash. */
export interface WorkerExit {
  role: WorkerRole;
  at: number;
  code: number | null;
  signal: string | null;
  /** `after publish` or `after commit` for an injected crash. */
  fault?: string;
  /** It exited before it was running (e.g. PostgreSQL was down for its migrations): started again, not a crash. */
  whileStarting: boolean;
  tail: string[];
}

interface WorkerSlot {
  role: WorkerRole;
  env: Record<string, string>;
  process?: SupervisedProcess;
}

/**
 * The demo's `npm run worker` processes: relays and fulfilment consumers,
 * each started again whenever it exits, until the pool stops. Their crash
 * faults (after a publish ack, after a commit) are the workers' own, at the
 * points no transaction covers.
 */
export class WorkerPool {
  readonly exits: WorkerExit[] = [];
  private readonly slots: WorkerSlot[] = [];
  private readonly log: WriteStream;
  private stopping = false;

  constructor(
    private readonly env: Record<string, string>,
    logFile: string,
  ) {
    this.log = createWriteStream(logFile, { flags: 'w' });
    this.log.on('error', () => undefined);
  }

  add(role: WorkerRole, env: Record<string, string>): void {
    const slot: WorkerSlot = { role, env };
    this.slots.push(slot);
    this.spawn(slot);
  }

  /** Sets the environment of later restarts, e.g. to turn the crash faults off, and restarts every worker with it. */
  async restartAllWith(change: (role: WorkerRole, env: Record<string, string>) => Record<string, string>): Promise<void> {
    for (const slot of this.slots) slot.env = change(slot.role, slot.env);
    await Promise.all(this.slots.map((slot) => slot.process?.stop()));
    for (const slot of this.slots) this.spawn(slot);
  }

  async stopAll(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.slots.map((slot) => slot.process?.stop()));
    await new Promise<void>((resolve) => this.log.end(resolve));
  }

  killAllNow(): void {
    this.stopping = true;
    for (const slot of this.slots) slot.process?.killNow();
  }

  private spawn(slot: WorkerSlot): void {
    const child = new SupervisedProcess({
      script: WORKER_MAIN,
      env: { ...this.env, ...slot.env, NO_COLOR: '1' },
      output: { log: this.log, name: `${slot.role} ${this.slots.indexOf(slot)}`, tailLines: TAIL_LINES },
    });
    slot.process = child;
    let ready = false;
    child.onLine((line) => (ready ||= line.includes('Worker running')));
    void child.ended.then((end) => {
      if (end.stoppedBySupervisor) return;
      const fault = child.tail.map((line) => /^fault: crash (.+)$/.exec(line)?.[1]).find(Boolean);
      this.exits.push({ role: slot.role, at: Date.now(), code: end.code, signal: end.signal, fault, whileStarting: !ready && !fault, tail: [...child.tail] });
      if (!this.stopping) void sleep(RESTART_PAUSE_MS).then(() => !this.stopping && slot.process === child && this.spawn(slot));
    });
  }
}
