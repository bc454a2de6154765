import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

/** The compiled demo worker; this file is compiled to dist/chaos/. */
const WORKER_MAIN = fileURLToPath(new URL('../src/demo/worker.js', import.meta.url));
const RESTART_PAUSE_MS = 200;
const STOP_GRACE_MS = 5_000;
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
  ready: boolean;
  child?: ChildProcess;
  exited?: Promise<void>;
  tail: string[];
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
    const slot: WorkerSlot = { role, env, ready: false, tail: [] };
    this.slots.push(slot);
    this.spawn(slot);
  }

  /** Sets the environment of later restarts, e.g. to turn the crash faults off, and restarts every worker with it. */
  async restartAllWith(change: (role: WorkerRole, env: Record<string, string>) => Record<string, string>): Promise<void> {
    for (const slot of this.slots) slot.env = change(slot.role, slot.env);
    await Promise.all(this.slots.map((slot) => this.stopSlot(slot)));
    for (const slot of this.slots) this.spawn(slot);
  }

  async stopAll(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.slots.map((slot) => this.stopSlot(slot)));
    await new Promise<void>((resolve) => this.log.end(resolve));
  }

  killAllNow(): void {
    this.stopping = true;
    for (const slot of this.slots) if (slot.child && slot.child.exitCode === null) slot.child.kill('SIGKILL');
  }

  private spawn(slot: WorkerSlot): void {
    const child = spawn(process.execPath, [WORKER_MAIN], { env: { ...process.env, ...this.env, ...slot.env, NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
    slot.child = child;
    slot.ready = false;
    slot.tail = [];
    const name = `${slot.role} ${this.slots.indexOf(slot)}`;
    this.log.write(`--- ${name} started (pid ${child.pid}) at ${new Date().toISOString()}\n`);
    const record = (chunk: Buffer) => {
      const lines = chunk.toString('utf8').split('\n').filter(Boolean);
      for (const line of lines) this.log.write(`[${name}] ${line}\n`);
      if (lines.some((line) => line.includes('Worker running'))) slot.ready = true;
      slot.tail.push(...lines);
      slot.tail.splice(0, Math.max(0, slot.tail.length - TAIL_LINES));
    };
    child.stdout!.on('data', record);
    child.stderr!.on('data', record);
    let stopped = false;
    slot.exited = new Promise<void>((resolve) =>
      // 'close', not 'exit': the output (with an injected crash's line) is all read by then.
      child.once('close', (code, signal) => {
        this.log.write(`--- ${name} exited (code ${code}, signal ${signal})\n`);
        stopped = (child as ChildProcess & { stoppedByPool?: boolean }).stoppedByPool === true;
        if (!stopped) {
          const fault = slot.tail.map((line) => /^fault: crash (.+)$/.exec(line)?.[1]).find(Boolean);
          this.exits.push({ role: slot.role, at: Date.now(), code, signal, fault, whileStarting: !slot.ready && !fault, tail: [...slot.tail] });
          if (!this.stopping) void sleep(RESTART_PAUSE_MS).then(() => !this.stopping && slot.child === child && this.spawn(slot));
        }
        resolve();
      }),
    );
  }

  private async stopSlot(slot: WorkerSlot): Promise<void> {
    const child = slot.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    (child as ChildProcess & { stoppedByPool?: boolean }).stoppedByPool = true;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
    await slot.exited;
    clearTimeout(timer);
  }
}
