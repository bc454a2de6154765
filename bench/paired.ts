/**
 * `npm run bench`: builds nothing itself (the script runs tsc first), then
 * compares the idempotency layer, the bare business transaction and the
 * peer in paired windows on one app process. See bench/README.md.
 */
import { runBenchCommand } from './command-main.js';
import { PAIRED_COMMAND_LINE, pairedOptions } from './paired-options.js';
import { runPairedSession } from './paired-session.js';

runBenchCommand({ tag: 'bench', line: PAIRED_COMMAND_LINE, options: pairedOptions, session: runPairedSession });
