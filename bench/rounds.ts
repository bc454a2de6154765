/**
 * `npm run bench:rounds`: builds nothing itself (the script runs tsc first),
 * then runs every scenario once per round, interleaved, each against an app
 * process of its own variant. See bench/README.md for the flags and the
 * scenarios; `npm run bench` (paired.ts) is the finer method for the
 * comparisons both can make.
 */
import { BENCH_COMMAND_LINE, benchOptions } from './cli-options.js';
import { runBenchSession } from './bench-session.js';
import { runBenchCommand } from './command-main.js';

runBenchCommand({ tag: 'bench', line: BENCH_COMMAND_LINE, options: benchOptions, session: runBenchSession });
