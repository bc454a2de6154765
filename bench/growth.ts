/**
 * `npm run bench:growth`: builds nothing itself (the script runs tsc first),
 * then measures how the idempotency layer behaves as `idempotency_records`
 * grows, and while the reaper deletes a backlog. See bench/README.md.
 */
import { runBenchCommand } from './command-main.js';
import { GROWTH_COMMAND_LINE, growthOptions } from './growth-options.js';
import { runGrowthSession } from './growth-session.js';

runBenchCommand({ tag: 'growth', line: GROWTH_COMMAND_LINE, options: growthOptions, session: runGrowthSession });
