import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** How pgbench sends statements: `prepared` parses each once per connection, `extended` parses each time. */
export type QueryMode = 'prepared' | 'extended';

/** One pgbench run of one script. */
export interface Window {
  script: string;
  mode: QueryMode;
  seconds: number;
  clients: number;
  threads: number;
  /** `-D name=value` for each: the values of the statements' parameters. */
  variables: Record<string, string>;
}

/** What a window measured. */
export interface WindowResult {
  tps: number;
  /** The median transaction latency, from pgbench's per-transaction log. */
  p50Ms: number;
}

/**
 * Runs pgbench on `url` for one window, without its own tables (`-n`), and
 * reads its tps and the median latency of the transactions it logged. A
 * client that aborts (a failed statement) fails the window: the script is
 * then not what the module sends.
 */
export async function runWindow(url: string, window: Window): Promise<WindowResult> {
  const logs = await mkdtemp(join(tmpdir(), 'pgbench-window-'));
  try {
    const args = ['-n', '-M', window.mode, '-c', String(window.clients), '-j', String(window.threads), '-T', String(window.seconds)];
    args.push('-f', window.script, '-l', `--log-prefix=${join(logs, 'tx')}`);
    for (const [name, value] of Object.entries(window.variables)) args.push('-D', `${name}=${value}`);
    const { stdout } = await run('pgbench', [...args, url], { maxBuffer: 1 << 20 });
    const tps = /^tps = ([\d.]+)/m.exec(stdout);
    if (!tps) throw new Error(`pgbench printed no tps for ${window.script}:\n${stdout}`);
    return { tps: Number(tps[1]), p50Ms: await medianLatencyMs(logs) };
  } finally {
    await rm(logs, { recursive: true, force: true });
  }
}

/** The median of the latency column (µs, the third) of every per-transaction log in `folder`, one file per thread. */
async function medianLatencyMs(folder: string): Promise<number> {
  const latencies: number[] = [];
  for (const file of await readdir(folder)) {
    for (const line of (await readFile(join(folder, file), 'utf8')).split('\n')) {
      const micros = Number(line.split(' ')[2]);
      if (line && Number.isFinite(micros)) latencies.push(micros);
    }
  }
  latencies.sort((a, b) => a - b);
  return latencies.length ? latencies[Math.floor(latencies.length / 2)] / 1000 : NaN;
}
