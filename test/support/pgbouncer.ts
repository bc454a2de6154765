import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../../src/demo/database/embedded-postgres.js';

/** PGBOUNCER_BINARY, else `pgbouncer` where Debian's package puts it or on PATH; undefined when there is none. */
export function pgbouncerBinary(): string | undefined {
  for (const candidate of [process.env.PGBOUNCER_BINARY, '/usr/sbin/pgbouncer', 'pgbouncer']) {
    if (candidate && spawnSync(candidate, ['--version']).status === 0) return candidate;
  }
  return undefined;
}

/** A PgBouncer of the test's own in front of a server: what a `postgres://` URL through it looks like, and how to stop it. */
export interface PrivatePgbouncer {
  /** `databaseUrl` with host and port replaced by PgBouncer's. */
  urlFor(databaseUrl: string): string;
  stop(): Promise<void>;
}

/**
 * Starts PgBouncer in transaction mode, as it is most often deployed and as
 * Debian ships it (1.18: no prepared-statement tracking), in front of the
 * server of `serverUrl`, trusting its user. Run as root, it switches to the
 * `postgres` user, as PgBouncer refuses to run as root.
 */
export async function startPgbouncer(binary: string, serverUrl: string): Promise<PrivatePgbouncer> {
  const server = new URL(serverUrl);
  const user = decodeURIComponent(server.username || 'postgres');
  const password = decodeURIComponent(server.password);
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'pgbouncer-'));
  chmodSync(dir, 0o755); // read by the user PgBouncer switches to
  writeFileSync(join(dir, 'users.txt'), `"${user}" "${password}"\n`, { mode: 0o644 });
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      // The server's password, if it asks for one (the embedded server does); clients are trusted.
      `* = host=${server.hostname} port=${server.port || 5432}${password ? ` password=${password}` : ''}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'users.txt')}`,
      'pool_mode = transaction',
      'default_pool_size = 20',
      'max_client_conn = 500',
      // node-postgres sends these at startup; PgBouncer passes on only the parameters it knows.
      'ignore_startup_parameters = extra_float_digits,options',
      '',
    ].join('\n'),
    { mode: 0o644 },
  );
  const asRoot = process.getuid?.() === 0;
  const child: ChildProcess = spawn(binary, [...(asRoot ? ['-u', 'postgres'] : []), join(dir, 'pgbouncer.ini')], { stdio: ['ignore', 'ignore', 'pipe'] });
  let output = '';
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = once(child, 'exit');
  for (let i = 0; i < 100 && !(await listening(port)); i++) {
    if (child.exitCode !== null) break;
    await sleep(50);
  }
  if (!(await listening(port))) {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`PgBouncer did not start: ${output.trim()}`);
  }
  return {
    urlFor: (databaseUrl) => {
      const url = new URL(databaseUrl);
      url.hostname = '127.0.0.1';
      url.port = String(port);
      return url.toString();
    },
    stop: async () => {
      child.kill('SIGTERM');
      await Promise.race([exited, sleep(5000)]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
