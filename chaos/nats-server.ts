import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../src/demo/database/embedded-postgres.js';
import { natsServerBinary } from '../src/demo/messaging/nats-server-binary.js';

const BINARY = natsServerBinary();

/** A nats-server of the run's own, with JetStream on a data folder that survives its restarts. */
export class ChaosNats {
  private child?: ChildProcess;

  private constructor(
    readonly url: string,
    private readonly port: number,
    private readonly dataDir: string,
  ) {}

  /** Undefined when the binary is missing: the run then leaves delivery out. */
  static async start(): Promise<ChaosNats | undefined> {
    if (!BINARY || !existsSync(BINARY)) return undefined;
    const port = await freePort();
    const nats = new ChaosNats(`nats://127.0.0.1:${port}`, port, mkdtempSync(join(tmpdir(), 'chaos-nats-')));
    await nats.up();
    return nats;
  }

  static get binary(): string {
    return BINARY ?? 'nats-server (NATS_SERVER_BINARY, or on PATH)';
  }

  /** Stops (SIGTERM: JetStream flushes) and starts the server again on the same port and data. */
  async restart(pauseMs: number): Promise<void> {
    await this.down();
    await sleep(pauseMs);
    await this.up();
  }

  async close(): Promise<void> {
    await this.down();
    rmSync(this.dataDir, { recursive: true, force: true });
  }

  private async up(): Promise<void> {
    this.child = spawn(BINARY!, ['-a', '127.0.0.1', '-p', String(this.port), '-js', '-sd', this.dataDir], { stdio: 'ignore' });
    for (let i = 0; i < 400; i++) {
      if (await answers(this.port)) return;
      await sleep(25);
    }
    throw new Error(`nats-server did not answer on port ${this.port}`);
  }

  private async down(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    await exited;
  }
}

function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    const done = (ok: boolean) => (socket.destroy(), resolve(ok));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}
