/**
 * `npm run bench:pgbench`: the statements the module sends for a first
 * execution, and those of the bare business transaction, run by pgbench on a scratch database with the
 * package's and the demo's tables, in alternating windows. It measures what
 * PostgreSQL alone allows each design, with no app in front. See
 * bench/README.md.
 */
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { type CommandLineValues, list, positiveNumber, switchFlag, valueFlag, wholeNumber } from '../../harness/command-line.js';
import { createBenchDatabase } from '../bench-database.js';
import { runBenchCommand } from '../command-main.js';
import { migrate } from '../growth-seeding.js';
import { machineBeforeRun } from '../machine-load.js';
import { median } from '../statistics.js';
import { type QueryMode, runWindow, type WindowResult } from './pgbench-window.js';
import { PGBENCH_VARIABLES } from './pgbench-variables.js';

/** The scripts, bare first: every other one is compared with it window by window. */
const SCRIPTS = ['bare', 'bare-pipelined', 'guarded-first', 'guarded-first-units', 'claim-first-two-writes'];
const MODES: readonly QueryMode[] = ['prepared', 'extended'];
/** The scripts sit beside the sources; the build leaves them there. */
const SCRIPT_FOLDER = fileURLToPath(new URL('../../../bench/pgbench/', import.meta.url));

const COMMAND_LINE = {
  command: 'npm run bench:pgbench --',
  flags: {
    window: valueFlag({ placeholder: '<s>', description: 'seconds of each measured pgbench window', default: '5', parse: positiveNumber() }),
    warmup: valueFlag({ placeholder: '<s>', description: 'seconds of each script, unmeasured, before the first round of a mode', default: '2', parse: positiveNumber() }),
    rounds: valueFlag({ placeholder: '<n>', description: 'rounds; each runs every script once, in reverse every other round', default: '10', parse: wholeNumber() }),
    clients: valueFlag({ placeholder: '<n>', description: 'pgbench clients (-c)', default: '32', parse: wholeNumber() }),
    threads: valueFlag({ placeholder: '<n>', description: 'pgbench threads (-j)', default: '2', parse: wholeNumber() }),
    notify: switchFlag(
      "notify the relay at each insert, as the outbox does by default: PostgreSQL then serialises the commits (the notify queue's lock is held through the WAL flush), and throughput follows the disk's flush time more than the statements",
    ),
    modes: valueFlag({ placeholder: '<modes>', description: 'query modes (-M), comma-separated: prepared, extended', default: MODES.join(','), parse: list }),
  },
  footer: 'PostgreSQL: DATABASE_URL if set, else an embedded server started for the run. pgbench must be on PATH.',
};

type Options = CommandLineValues<typeof COMMAND_LINE.flags>;

runBenchCommand({
  tag: 'pgbench',
  line: COMMAND_LINE,
  options: (values: Options) => {
    const unknown = values.modes.filter((mode) => !MODES.includes(mode as QueryMode));
    if (unknown.length) throw new Error(`--modes: unknown query modes ${unknown.join(', ')}`);
    return values;
  },
  session: async (options, cleanup, log) => {
    await machineBeforeRun(log);
    const database = await createBenchDatabase(String(process.pid), log);
    cleanup.add('database', database.close);
    await migrate(database.url);
    log(`${database.description}; load average ${loadavg().map((load) => load.toFixed(1)).join(' ')}`);
    for (const mode of options.modes as QueryMode[]) {
      const window = (script: string, seconds: number) =>
        runWindow(database.url, { script: `${SCRIPT_FOLDER}${script}.sql`, mode, seconds, clients: options.clients, threads: options.threads, variables: { ...PGBENCH_VARIABLES, notify: String(options.notify) } });
      for (const script of SCRIPTS) await window(script, options.warmup);
      const rounds: Array<Record<string, WindowResult>> = [];
      for (let round = 0; round < options.rounds; round++) {
        const results: Record<string, WindowResult> = {};
        for (const script of round % 2 ? [...SCRIPTS].reverse() : SCRIPTS) results[script] = await window(script, options.window);
        rounds.push(results);
        log(`-M ${mode} round ${round + 1}/${options.rounds}: ${SCRIPTS.map((script) => `${script} ${results[script].tps.toFixed(0)}`).join(', ')} tps`);
      }
      console.log(report(mode, options, rounds));
    }
    log(`load average ${loadavg().map((load) => load.toFixed(1)).join(' ')}`);
    return 0;
  },
});

/** Per script: the median tps, the median of its per-round ratios to bare with their range, the median p50 latency. */
function report(mode: QueryMode, options: Options, rounds: ReadonlyArray<Record<string, WindowResult>>): string {
  const lines = [
    `\n-M ${mode}, -c ${options.clients} -j ${options.threads}, notify ${options.notify ? 'on' : 'off'}, ${rounds.length} rounds of ${options.window} s windows`,
    '| script | tps (median) | µs per transaction | ratio to bare: median (min–max) | latency p50 ms |',
    '|---|---:|---:|---|---:|',
  ];
  for (const script of SCRIPTS) {
    const tps = median(rounds.map((round) => round[script].tps));
    const ratios = rounds.map((round) => round[script].tps / round.bare.tps);
    const range = `${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}`;
    const p50 = median(rounds.map((round) => round[script].p50Ms));
    lines.push(`| ${script} | ${tps.toFixed(0)} | ${(1e6 / tps).toFixed(0)} | ${median(ratios).toFixed(3)} (${range}) | ${p50.toFixed(2)} |`);
  }
  return lines.join('\n');
}
