import { setTimeout as sleep } from 'node:timers/promises';
import type { DemoCluster } from './cluster.js';
import type { ChaosDatabase } from './database.js';
import { isHealthy } from './health.js';
import type { SeededRandom } from './random.js';

/**
 * `kill-instance`: SIGKILL of an app instance, restarted on its port after
 * a pause; `terminate-backends`: pg_terminate_backend on a random subset of
 * the app's connections; `restart-postgres`: the embedded server stopped and
 * started again on the same port and data (once per run).
 */
export type FaultKind = 'kill-instance' | 'terminate-backends' | 'restart-postgres' | 'crash-after-publish' | 'crash-after-commit' | 'restart-nats' | 'failover';
/**
 * Every kind, in report order. Then come delivery's (chaos/delivery.ts):
 * worker crashes at their uncovered points, and a NATS restart; `failover`
 * is the failover run's (chaos/failover.ts): the primary killed, its standby
 * promoted, the endpoint moved.
 */
export const FAULT_KINDS: readonly FaultKind[] = ['kill-instance', 'terminate-backends', 'restart-postgres', 'crash-after-publish', 'crash-after-commit', 'restart-nats', 'failover'];

/** When a fault was being done, and until its target was back. */
export interface FaultWindow {
  kind: FaultKind;
  startedAt: number;
  endedAt: number;
  detail: string;
}

/** A bound on the fault count, whatever the duration. */
const MAX_FAULTS = 1000;
const RECOVERY_TIMEOUT_MS = 60_000;

/**
 * Injects faults on a seeded schedule until a deadline. A killed instance
 * comes back in the background (its window lasts until it is healthy), as
 * does one that crashed, so other faults go on meanwhile. A kill always
 * leaves one instance serving, and the PostgreSQL restart waits until no
 * instance is starting, so that a boot's migrations never meet a stopped
 * server.
 */
export class FaultInjector {
  readonly windows: FaultWindow[] = [];
  private readonly restarts = new Set<Promise<void>>();
  /** The first failure of a background restart, raised by `run`. */
  private failure: unknown;

  constructor(
    private readonly cluster: DemoCluster,
    private readonly database: ChaosDatabase,
    private readonly random: SeededRandom,
    private readonly log: (line: string) => void,
  ) {}

  async run(startMs: number, untilMs: number): Promise<void> {
    // Once per run, somewhere in the middle, when the harness owns the server.
    let restartAt = this.database.restart ? startMs + (untilMs - startMs) * (0.35 + 0.2 * this.random.next()) : Infinity;
    // A shuffled bag: in a short run each kind still comes early.
    let bag: FaultKind[] = [];
    try {
      for (let injected = 0; injected < MAX_FAULTS; injected++) {
        const pause = Math.min(this.random.int(500, 2000), untilMs - Date.now());
        if (pause <= 0) break;
        await sleep(pause);
        if (Date.now() >= untilMs || this.failure) break;
        for (const instance of this.cluster.crashed()) this.inBackground(this.cluster.revive(instance));
        if (Date.now() >= restartAt) {
          restartAt = Infinity;
          await Promise.all(this.restarts);
          await this.record('restart-postgres', () => this.restartPostgres());
          continue;
        }
        if (bag.length === 0) bag = this.shuffle(['kill-instance', 'kill-instance', 'terminate-backends']);
        const kind = bag.pop()!;
        if (kind === 'terminate-backends') await this.record(kind, async () => `${await this.database.terminateBackends(this.random)} backends terminated`);
        else this.killOne();
      }
    } finally {
      await Promise.all(this.restarts);
    }
    if (this.failure) throw this.failure;
  }

  /** Whether [from, to] overlaps a window of one of `kinds`, or the `graceMs` after it. */
  overlaps(from: number, to: number, graceMs: number, kinds: readonly FaultKind[]): boolean {
    return this.windows.some((window) => kinds.includes(window.kind) && from <= window.endedAt + graceMs && to >= window.startedAt);
  }

  /** Kills a serving instance, unless it is the last one serving, and lets it come back in the background. */
  private killOne(): void {
    const serving = Array.from({ length: this.cluster.size }, (_, i) => i).filter((i) => this.cluster.isServing(i));
    if (serving.length < 2) return;
    const instance = this.random.pick(serving);
    const pauseMs = this.random.int(200, 1500);
    this.inBackground(
      this.record('kill-instance', async () => {
        await this.cluster.killAndRestart(instance, pauseMs);
        return `instance ${instance}, down ${pauseMs} ms before its restart`;
      }),
    );
  }

  /** Tracks a restart that goes on while other faults are injected; its failure ends the run. */
  private inBackground(restart: Promise<void>): void {
    const tracked = restart.catch((error: unknown) => {
      this.failure ??= error;
    });
    this.restarts.add(tracked);
    void tracked.finally(() => this.restarts.delete(tracked));
  }

  private async restartPostgres(): Promise<string> {
    await this.database.restart!();
    const recovering = Date.now();
    await this.untilHealthy();
    return `server restarted; every instance healthy ${Date.now() - recovering} ms later`;
  }

  private async record(kind: FaultKind, inject: () => Promise<string>): Promise<void> {
    const startedAt = Date.now();
    const detail = await inject();
    this.windows.push({ kind, startedAt, endedAt: Date.now(), detail });
    this.log(`fault ${kind}: ${detail} (${Date.now() - startedAt} ms)`);
  }

  /** Until every instance answers /health with 200 again (its pool reconnected). */
  private async untilHealthy(): Promise<void> {
    const deadline = Date.now() + RECOVERY_TIMEOUT_MS;
    for (;;) {
      // An instance the restart brought down is started again (and counted as a crash by the cluster).
      await this.cluster.reviveAll();
      if ((await Promise.all(this.cluster.urls.map(isHealthy))).every(Boolean)) return;
      if (Date.now() > deadline) throw new Error(`instances not healthy ${RECOVERY_TIMEOUT_MS} ms after the PostgreSQL restart`);
      await sleep(100);
    }
  }

  private shuffle<T>(items: T[]): T[] {
    for (let i = items.length - 1; i > 0; i--) {
      const j = this.random.int(0, i);
      [items[i], items[j]] = [items[j], items[i]];
    }
    return items;
  }
}
