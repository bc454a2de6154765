import { createWriteStream, type WriteStream } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { freePort } from '../src/demo/database/embedded-postgres.js';
import { SupervisedProcess } from '../harness/supervised-process.js';
import { isHealthy } from './health.js';

/** The compiled demo; this file is compiled to dist/chaos/. */
const DEMO_MAIN = fileURLToPath(new URL('../src/demo/main.js', import.meta.url));
/** Migrations, and TypeORM's own connection retries while PostgreSQL restarts, fit in this. */
const HEALTHY_TIMEOUT_MS = 60_000;
const TAIL_LINES = 30;
/** Spawns per start: a crash while booting is the product's to answer for, not the run's end. */
const START_ATTEMPTS = 3;

/** An instance that exited without the harness killing it. */
export interface UnexpectedExit {
  instance: number;
  at: number;
  code: number | null;
  signal: string | null;
  /** The last lines it wrote. */
  tail: string[];
}

interface Slot {
  port: number;
  url: string;
  process?: SupervisedProcess;
  /** Started and healthy since. */
  serving: boolean;
  /** Inside a kill-and-restart, which brings it back itself. */
  restarting: boolean;
}

/**
 * The demo app as separate processes on fixed loopback ports: a killed
 * instance comes back on the same port, so clients keep their URLs. Output
 * goes to one log file per instance.
 */
export class DemoCluster {
  readonly unexpectedExits: UnexpectedExit[] = [];
  private readonly log: WriteStream;
  /** Which instance each process started was, by pid: the demo's audit names processes by pid. */
  private readonly instanceByPid = new Map<string, number>();

  private constructor(
    private readonly slots: Slot[],
    private readonly env: Record<string, string>,
    logFile: string,
  ) {
    this.log = createWriteStream(logFile, { flags: 'w' });
    // A log that cannot be written must not take the run down with it.
    this.log.on('error', () => undefined);
  }

  /** Picks the ports and starts every instance, one after the other: the first one runs the migrations. */
  static async start(count: number, env: Record<string, string>, logFile: string): Promise<DemoCluster> {
    const slots: Slot[] = [];
    for (let i = 0; i < count; i++) {
      const port = await freePort();
      slots.push({ port, url: `http://127.0.0.1:${port}`, serving: false, restarting: false });
    }
    const cluster = new DemoCluster(slots, env, logFile);
    try {
      for (let i = 0; i < count; i++) await cluster.startInstance(i);
    } catch (error) {
      await cluster.stopAll();
      throw error;
    }
    return cluster;
  }

  get urls(): string[] {
    return this.slots.map((slot) => slot.url);
  }

  get size(): number {
    return this.slots.length;
  }

  isRunning(instance: number): boolean {
    return this.slots[instance].process?.running === true;
  }

  /** The instance a process of the run was, by its pid; undefined for a pid the run never started. */
  instanceWithPid(pid: string): number | undefined {
    return this.instanceByPid.get(pid);
  }

  /** Running, and healthy since it was started: safe to count on. */
  isServing(instance: number): boolean {
    return this.slots[instance].serving && this.isRunning(instance);
  }

  /**
   * Spawns the instance and waits until `/health` answers 200. An instance
   * that exits while starting is a crash (recorded as such) and is spawned
   * again, a few times at most.
   */
  async startInstance(instance: number): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const outcome = await this.spawnUntilHealthy(instance);
      if (outcome === 'healthy') return;
      if (attempt >= START_ATTEMPTS) throw new Error(`instance ${instance} ${outcome} ${attempt} times in a row:\n${this.tailOf(instance)}`);
    }
  }

  private async spawnUntilHealthy(instance: number): Promise<'healthy' | 'exited while starting'> {
    const slot = this.slots[instance];
    const child = new SupervisedProcess({
      script: DEMO_MAIN,
      env: { ...this.env, PORT: String(slot.port), NO_COLOR: '1' },
      output: { log: this.log, name: `instance ${instance}`, tailLines: TAIL_LINES },
    });
    slot.process = child;
    slot.serving = false;
    this.instanceByPid.set(String(child.child.pid), instance);
    void child.ended.then((end) => {
      if (!end.stoppedBySupervisor) this.unexpectedExits.push({ instance, at: Date.now(), code: end.code, signal: end.signal, tail: [...child.tail] });
    });
    const deadline = Date.now() + HEALTHY_TIMEOUT_MS;
    while (!(await isHealthy(slot.url))) {
      if (!this.isRunning(instance)) return 'exited while starting';
      if (Date.now() > deadline) throw new Error(`instance ${instance} not healthy after ${HEALTHY_TIMEOUT_MS} ms:\n${this.tailOf(instance)}`);
      await sleep(100);
    }
    slot.serving = true;
    return 'healthy';
  }

  /** SIGKILL: no shutdown hook runs; PostgreSQL sees the connections drop and rolls back open transactions. */
  async kill(instance: number): Promise<void> {
    const slot = this.slots[instance];
    slot.serving = false;
    await slot.process?.kill();
  }

  /** SIGKILL, a pause, then a start on the same port; resolves once it is healthy again. */
  killAndRestart(instance: number, pauseMs: number): Promise<void> {
    return this.restarting(instance, async () => {
      await this.kill(instance);
      await sleep(pauseMs);
      await this.startInstance(instance);
    });
  }

  /** Instances that are down and that no restart is bringing back: they exited on their own. */
  crashed(): number[] {
    return this.slots.flatMap((slot, i) => (!this.isRunning(i) && !slot.restarting ? [i] : []));
  }

  /** Starts a crashed instance again; resolves once it is healthy. */
  revive(instance: number): Promise<void> {
    return this.restarting(instance, () => this.startInstance(instance));
  }

  /** Starts every crashed instance again, one after the other. */
  async reviveAll(): Promise<void> {
    for (const instance of this.crashed()) await this.revive(instance);
  }

  /** Marks the instance as being brought back, so that nothing else starts it meanwhile. */
  private async restarting(instance: number, work: () => Promise<void>): Promise<void> {
    this.slots[instance].restarting = true;
    try {
      await work();
    } finally {
      this.slots[instance].restarting = false;
    }
  }

  /** SIGTERM to all, then SIGKILL after a grace period. */
  async stopAll(): Promise<void> {
    await Promise.all(this.slots.map((slot) => slot.process?.stop()));
    await new Promise<void>((resolve) => this.log.end(resolve));
  }

  /** Synchronous last resort on an interrupt: no instance may outlive the harness. */
  killAllNow(): void {
    for (const slot of this.slots) slot.process?.killNow();
  }

  private tailOf(instance: number): string {
    return this.slots[instance].process?.tail.join('\n') ?? '';
  }
}
