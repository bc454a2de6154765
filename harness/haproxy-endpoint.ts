import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/** Debian's haproxy; `HAPROXY_BINARY` names another. */
const DEFAULT_BINARY = '/usr/sbin/haproxy';
const READY_TIMEOUT_MS = 10_000;
const BACKEND = 'postgres';

/** The haproxy binary, or undefined when it is not installed: callers skip with a line. */
export function haproxyBinary(): string | undefined {
  const binary = process.env.HAPROXY_BINARY ?? DEFAULT_BINARY;
  return existsSync(binary) ? binary : undefined;
}

/**
 * One TCP endpoint in front of several PostgreSQL servers, an HAProxy of the
 * caller's own (its config and admin socket in a temp folder): every new
 * connection goes to the server it points at. `repoint` moves it, as an HA
 * setup moves its endpoint after a failover: the old server is put in
 * maintenance and the connections still open to it are cut, so clients
 * reconnect to the new one.
 *
 * ```ts
 * const endpoint = await HaproxyEndpoint.start({ port: 16432, servers: { primary: 15432, standby: 15433 }, active: 'primary' });
 * // ... the app connects to endpoint.url(databaseUrl)
 * await endpoint.repoint('standby');
 * ```
 */
export class HaproxyEndpoint {
  private constructor(
    readonly port: number,
    private readonly dir: string,
    private readonly child: ChildProcess,
    private readonly servers: readonly string[],
  ) {}

  static async start(options: { port: number; servers: Record<string, number>; active: string; binary?: string }): Promise<HaproxyEndpoint> {
    const binary = options.binary ?? haproxyBinary();
    if (!binary) throw new Error('no haproxy binary (apt-get install haproxy, or set HAPROXY_BINARY)');
    const dir = mkdtempSync(join(tmpdir(), 'haproxy-endpoint-'));
    writeFileSync(join(dir, 'haproxy.cfg'), config(options.port, join(dir, 'admin.sock'), options.servers, options.active));
    const child = spawn(binary, ['-f', join(dir, 'haproxy.cfg'), '-db'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const endpoint = new HaproxyEndpoint(options.port, dir, child, Object.keys(options.servers));
    const deadline = Date.now() + READY_TIMEOUT_MS;
    while (!(await endpoint.admin('show info').then(() => true, () => false))) {
      if (child.exitCode !== null || Date.now() > deadline) {
        await endpoint.stop();
        throw new Error(`haproxy did not start: ${stderr.trim() || `not ready within ${READY_TIMEOUT_MS} ms`}`);
      }
      await sleep(50);
    }
    return endpoint;
  }

  /** `databaseUrl` (its user, password and database) reached through the endpoint, on whatever server it points at. */
  url(databaseUrl: string): string {
    const through = new URL(databaseUrl);
    through.hostname = '127.0.0.1';
    through.port = String(this.port);
    return through.toString();
  }

  /** Points new connections at `server` and cuts every connection still open to the others. */
  async repoint(server: string): Promise<void> {
    if (!this.servers.includes(server)) throw new Error(`no server ${server}: ${this.servers.join(', ')}`);
    const others = this.servers.filter((name) => name !== server);
    await this.admin([`set server ${BACKEND}/${server} state ready`, ...others.flatMap((name) => [`set server ${BACKEND}/${name} state maint`, `shutdown sessions server ${BACKEND}/${name}`])].join('; '));
  }

  /** Stops haproxy and deletes its folder. */
  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      const ended = new Promise((resolve) => this.child.once('close', resolve));
      this.child.kill('SIGTERM');
      await ended;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** The last resort on an interrupt, synchronous. */
  stopNow(): void {
    this.child.kill('SIGKILL');
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** Sends commands to the runtime API (one connection per call) and returns its answer; rejects on an error answer. */
  private admin(command: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = createConnection({ path: join(this.dir, 'admin.sock') });
      let answer = '';
      socket.on('connect', () => socket.end(`${command}\n`));
      socket.on('data', (chunk) => (answer += chunk.toString('utf8')));
      socket.on('error', reject);
      socket.on('close', () => (/No such|Unknown command|not found|denied/i.test(answer) ? reject(new Error(`haproxy: ${command}: ${answer.trim()}`)) : resolve(answer)));
    });
  }
}

/**
 * TCP mode; no health checks: the endpoint goes where `repoint` says, as an
 * HA tool would move it. Client and server timeouts are long, since a pool
 * keeps idle connections for as long as it likes.
 */
function config(port: number, socket: string, servers: Record<string, number>, active: string): string {
  return [
    'global',
    `  stats socket ${socket} mode 600 level admin`,
    '  maxconn 2000',
    'defaults',
    '  mode tcp',
    '  timeout connect 2s',
    '  timeout client 1h',
    '  timeout server 1h',
    `frontend ${BACKEND}_in`,
    `  bind 127.0.0.1:${port}`,
    `  default_backend ${BACKEND}`,
    `backend ${BACKEND}`,
    ...Object.entries(servers).map(([name, serverPort]) => `  server ${name} 127.0.0.1:${serverPort}${name === active ? '' : ' disabled'}`),
    '',
  ].join('\n');
}
