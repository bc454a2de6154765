/**
 * `npm run bench`: builds nothing itself (the script runs tsc first), then
 * measures the idempotency layer against the bare business transaction. See
 * bench/README.md for the flags and the scenarios.
 */
import { BENCH_COMMAND_LINE, benchOptions } from './cli-options.js';
import { runBenchSession } from './bench-session.js';
import { runBenchCommand } from './command-main.js';

runBenchCommand({ tag: 'bench', line: BENCH_COMMAND_LINE, options: benchOptions, session: runBenchSession });
