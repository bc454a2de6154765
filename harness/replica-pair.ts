import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { appendFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import pg from 'pg';

const run = promisify(execFile);
/** Debian's PostgreSQL 15; `POSTGRES_BIN_DIR` names another. */
const DEFAULT_BIN_DIR = '/usr/lib/postgresql/15/bin';
/** The standby's name on the primary: its `application_name`, as `synchronous_standby_names` names it. */
export const STANDBY_NAME = 'standby';
const READY_TIMEOUT_MS = 60_000;

/** `synchronous`: the primary's commits wait for the standby (`synchronous_standby_names`); `asynchronous`: they do not. */
export type Replication = 'synchronous' | 'asynchronous';

export interface ReplicaPairOptions {
  /** Port of the primary, on 127.0.0.1. */
  primaryPort: number;
  /** Port of the standby, on 127.0.0.1. */
  standbyPort: number;
  replication: Replication;
  /** The primary's `synchronous_commit` in synchronous replication: `on` (the standby flushed) or `remote_apply` (it applied). Default `on`. */
  synchronousCommit?: 'on' | 'remote_apply' | 'remote_write';
  /** More server settings for both, e.g. `{ fsync: 'off', max_connections: '200' }`. */
  settings?: Record<string, string>;
  /** Where the binaries are; default `POSTGRES_BIN_DIR`, else Debian's PostgreSQL 15. */
  binDir?: string;
  log?: (line: string) => void;
}

/** One server of the pair. */
export interface PairServer {
  port: number;
  dataDir: string;
  /** A connection URL to `database` (default `postgres`) as the superuser `postgres`, without password. */
  url(database?: string): string;
}

/** Where the binaries are, or undefined when initdb is not there: callers skip with a line. */
export function replicaPairBinaries(binDir = process.env.POSTGRES_BIN_DIR ?? DEFAULT_BIN_DIR): string | undefined {
  return existsSync(join(binDir, 'initdb')) && existsSync(join(binDir, 'pg_basebackup')) ? binDir : undefined;
}

/**
 * A PostgreSQL primary and a streaming standby made with `pg_basebackup`, in
 * a temp folder of their own, on ports the caller picks: for tests and runs
 * that need a failover (kill the primary, promote the standby) or a real
 * replica. Run as root, the servers run as the `postgres` OS user (initdb
 * refuses root). Nothing of the machine's own cluster is touched.
 *
 * ```ts
 * const pair = await ReplicaPair.start({ primaryPort: 15432, standbyPort: 15433, replication: 'synchronous' });
 * try {
 *   // ... load on pair.primary.url()
 *   await pair.killPrimary();
 *   await pair.promoteStandby();
 *   // ... pair.standby.url() is the primary now
 * } finally {
 *   await pair.stop();
 * }
 * ```
 */
export class ReplicaPair {
  readonly primary: PairServer;
  readonly standby: PairServer;
  private stopped = false;

  private constructor(
    private readonly root: string,
    private readonly options: ReplicaPairOptions & { binDir: string },
    private readonly user: { uid: number; gid: number } | undefined,
  ) {
    this.primary = server(options.primaryPort, join(root, 'primary'));
    this.standby = server(options.standbyPort, join(root, 'standby'));
  }

  /**
   * initdb and start the primary, base-backup and start the standby, wait
   * until it streams (and, in synchronous replication, until the primary
   * counts it as its synchronous standby). Cleans up what it made on failure.
   */
  static async start(options: ReplicaPairOptions): Promise<ReplicaPair> {
    const binDir = options.binDir ?? replicaPairBinaries();
    if (!binDir || !replicaPairBinaries(binDir)) throw new Error(`no PostgreSQL binaries in ${options.binDir ?? process.env.POSTGRES_BIN_DIR ?? DEFAULT_BIN_DIR} (apt-get install postgresql, or set POSTGRES_BIN_DIR)`);
    const user = process.getuid?.() === 0 ? postgresUser() : undefined;
    const root = mkdtempSync(join(tmpdir(), 'replica-pair-'));
    // The servers' user must reach and write the folder: mkdtemp makes it 0700 and root's.
    chmodSync(root, 0o755);
    if (user) chownSync(root, user.uid, user.gid);
    const pair = new ReplicaPair(root, { ...options, binDir }, user);
    try {
      await pair.setUp();
      return pair;
    } catch (error) {
      await pair.stop();
      throw error;
    }
  }

  /** kill -9 of the primary's postmaster and every process it started: the host died, no shutdown ran. */
  async killPrimary(): Promise<void> {
    killTree(postmasterPid(this.primary.dataDir));
  }

  /** kill -9 of the standby's postmaster and its processes. */
  async killStandby(): Promise<void> {
    killTree(postmasterPid(this.standby.dataDir));
  }

  /** `pg_ctl promote`, waiting until the standby accepts writes. */
  async promoteStandby(): Promise<void> {
    await this.pgCtl(['promote', '-D', this.standby.dataDir, '-w', '-t', String(READY_TIMEOUT_MS / 1000)]);
  }

  /**
   * The standby's replay state as the primary sees it, from
   * pg_stat_replication: undefined when it is not connected.
   */
  async standbyState(): Promise<{ state: string; syncState: string } | undefined> {
    const rows = await query<{ state: string; sync_state: string }>(this.primary.url(), `SELECT state, sync_state FROM pg_stat_replication WHERE application_name = $1`, [STANDBY_NAME]);
    return rows[0] && { state: rows[0].state, syncState: rows[0].sync_state };
  }

  /** Stops both servers at once (immediate mode; a killed one is skipped) and deletes their folder. Safe to call twice. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const dataDir of [this.primary.dataDir, this.standby.dataDir]) {
      if (!existsSync(join(dataDir, 'postmaster.pid'))) continue;
      await this.pgCtl(['stop', '-D', dataDir, '-m', 'immediate', '-w']).catch(() => killTree(postmasterPid(dataDir)));
    }
    rmSync(this.root, { recursive: true, force: true });
  }

  /** The last resort on an interrupt, synchronous: kill -9 of both servers and the folder deleted. */
  stopNow(): void {
    this.stopped = true;
    for (const dataDir of [this.primary.dataDir, this.standby.dataDir]) killTree(postmasterPid(dataDir));
    rmSync(this.root, { recursive: true, force: true });
  }

  private async setUp(): Promise<void> {
    const { primaryPort, standbyPort, replication } = this.options;
    const log = this.options.log ?? (() => undefined);
    await this.bin('initdb', ['-D', this.primary.dataDir, '-U', 'postgres', '-A', 'trust', '--no-sync']);
    await appendFile(this.primary.dataDir + '/postgresql.conf', serverConf(primaryPort, this.root, this.options.settings));
    await this.pgCtl(['start', '-D', this.primary.dataDir, '-w', '-t', String(READY_TIMEOUT_MS / 1000), '-l', join(this.root, 'primary.log')]);
    log(`primary on port ${primaryPort}`);
    await this.bin('pg_basebackup', ['-h', '127.0.0.1', '-p', String(primaryPort), '-U', 'postgres', '-D', this.standby.dataDir, '-X', 'stream', '-c', 'fast', '--no-sync']);
    // Later lines win: the standby's own port, and a conninfo that names it for synchronous_standby_names.
    await appendFile(this.standby.dataDir + '/postgresql.conf', `port = ${standbyPort}\n`);
    await appendFile(
      this.standby.dataDir + '/postgresql.auto.conf',
      `primary_conninfo = 'host=127.0.0.1 port=${primaryPort} user=postgres application_name=${STANDBY_NAME}'\n`,
    );
    await this.writeAsServer(join(this.standby.dataDir, 'standby.signal'), '');
    await this.pgCtl(['start', '-D', this.standby.dataDir, '-w', '-t', String(READY_TIMEOUT_MS / 1000), '-l', join(this.root, 'standby.log')]);
    log(`standby on port ${standbyPort}, streaming from ${primaryPort}`);
    if (replication === 'synchronous') {
      // Set only now: with it set before the standby ran, the setup's own commits would wait for nobody.
      await query(this.primary.url(), `ALTER SYSTEM SET synchronous_standby_names = '${STANDBY_NAME}'`);
      await query(this.primary.url(), `ALTER SYSTEM SET synchronous_commit = '${this.options.synchronousCommit ?? 'on'}'`);
      await query(this.primary.url(), 'SELECT pg_reload_conf()');
    }
    await this.untilStreaming(replication === 'synchronous' ? 'sync' : 'async');
    log(`standby streaming, ${replication}`);
  }

  private async untilStreaming(syncState: 'sync' | 'async'): Promise<void> {
    const deadline = Date.now() + READY_TIMEOUT_MS;
    for (;;) {
      const state = await this.standbyState();
      if (state?.state === 'streaming' && state.syncState === syncState) return;
      if (Date.now() > deadline) throw new Error(`the standby is not streaming (${syncState}) ${READY_TIMEOUT_MS} ms after its start: ${JSON.stringify(state)}`);
      await sleep(100);
    }
  }

  private pgCtl(args: string[]): Promise<unknown> {
    return this.bin('pg_ctl', args);
  }

  private async bin(name: string, args: string[]): Promise<void> {
    try {
      await run(join(this.options.binDir, name), args, { ...this.user, cwd: this.root, env: { ...process.env, LC_ALL: 'C' } });
    } catch (error) {
      const failure = error as { stderr?: string; message: string };
      throw new Error(`${name} ${args.join(' ')} failed: ${failure.stderr?.trim() || failure.message}`);
    }
  }

  private async writeAsServer(path: string, content: string): Promise<void> {
    await writeFile(path, content);
    if (this.user) chownSync(path, this.user.uid, this.user.gid);
  }
}

function server(port: number, dataDir: string): PairServer {
  return { port, dataDir, url: (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}` };
}

function serverConf(port: number, socketDir: string, settings: Record<string, string> = {}): string {
  const all = { port: String(port), listen_addresses: '127.0.0.1', unix_socket_directories: socketDir, wal_level: 'replica', max_wal_senders: '5', hot_standby: 'on', ...settings };
  return Object.entries(all)
    .map(([name, value]) => `${name} = '${value}'\n`)
    .join('');
}

async function query<T = unknown>(url: string, sql: string, params: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    return (await client.query(sql, params)).rows as T[];
  } finally {
    await client.end();
  }
}

function postgresUser(): { uid: number; gid: number } {
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

/** The postmaster's pid, from the first line of postmaster.pid; undefined when it is not running. */
function postmasterPid(dataDir: string): number | undefined {
  try {
    const pid = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** SIGKILL of a process and its children, by pid: the backends, walsenders and the rest a postmaster started. */
function killTree(pid: number | undefined): void {
  if (pid === undefined) return;
  const children = (() => {
    try {
      return execFileSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' }).split('\n').map(Number).filter((child) => child > 0);
    } catch {
      return [];
    }
  })();
  for (const target of [pid, ...children]) {
    try {
      process.kill(target, 'SIGKILL');
    } catch {
      // Gone already.
    }
  }
}
