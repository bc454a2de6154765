import { parseArgs } from 'node:util';
import { positiveInteger, positiveNumber } from './cli-options.js';

/** The settings of one growth run. */
export interface GrowthOptions {
  /** Records seeded into `idempotency_records` before measuring, one database per size. */
  sizes: number[];
  /** Expired records the reaper has to delete while first executions run; 0 skips that part. */
  backlog: number;
  durationSeconds: number;
  warmupSeconds: number;
  rounds: number;
  connections: number;
  /** Completed keys created once per size for the replay scenarios, then cycled. */
  replayKeys: number;
  /** The reaper of the reaping variant: a short interval keeps it running back to back. */
  reaper: { intervalMs: number; batchSize: number; timeBudgetMs: number };
  /** Results go to bench/results/<name>.json and .svg. */
  resultsName: string;
}

/** Printed by `--help` and after a bad flag. */
export const GROWTH_USAGE = `Usage: npm run bench:growth -- [flags]

  --sizes <list>         records seeded before measuring, one database each; k and M
                         suffixes allowed (default 0,1M,10M)
  --backlog <n>          expired records for the reaper to delete while first executions
                         run; 0 skips that part (default 1M)
  --duration <s>         seconds each scenario is measured per round (default 10)
  --warmup <s>           seconds of unmeasured load before each measurement (default 2)
  --rounds <n>           rounds; order reverses every round, so even counts balance (default 2)
  --connections <n>      concurrent connections of the load generator (default 32)
  --replay-keys <n>      completed keys created per size for the replay scenarios (default 1000)
  --reaper-interval <ms> reaper interval of the reaping variant (default 100)
  --reaper-batch <n>     rows per reaper DELETE (default 1000)
  --reaper-budget <ms>   time budget of one reaper pass (default 2000)
  --results-name <n>     write bench/results/<n>.json and <n>.svg (default growth)
  --help                 this text

PostgreSQL: DATABASE_URL if set, else an embedded server started for the run.`;

/** Parses the command line; throws with a message naming the bad flag. */
export function parseGrowthOptions(argv: string[]): GrowthOptions | 'help' {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      sizes: { type: 'string', default: '0,1M,10M' },
      backlog: { type: 'string', default: '1M' },
      duration: { type: 'string', default: '10' },
      warmup: { type: 'string', default: '2' },
      // Two rounds, ascending then descending, are the smallest design in which linear drift cancels.
      rounds: { type: 'string', default: '2' },
      connections: { type: 'string', default: '32' },
      'replay-keys': { type: 'string', default: '1000' },
      'reaper-interval': { type: 'string', default: '100' },
      'reaper-batch': { type: 'string', default: '1000' },
      'reaper-budget': { type: 'string', default: '2000' },
      'results-name': { type: 'string', default: 'growth' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) return 'help';
  const sizes = values.sizes.split(',').map((text) => count('sizes', text.trim()));
  const options: GrowthOptions = {
    // Ascending and distinct: the smallest size is the baseline of every ratio.
    sizes: [...new Set(sizes)].sort((a, b) => a - b),
    backlog: count('backlog', values.backlog),
    durationSeconds: positiveNumber('duration', values.duration),
    warmupSeconds: positiveNumber('warmup', values.warmup, true),
    rounds: positiveInteger('rounds', values.rounds),
    connections: positiveInteger('connections', values.connections),
    replayKeys: positiveInteger('replay-keys', values['replay-keys']),
    reaper: {
      intervalMs: positiveInteger('reaper-interval', values['reaper-interval']),
      batchSize: positiveInteger('reaper-batch', values['reaper-batch']),
      timeBudgetMs: positiveInteger('reaper-budget', values['reaper-budget']),
    },
    resultsName: values['results-name'],
  };
  if (!/^[\w.-]+$/.test(options.resultsName)) throw new Error('--results-name may hold letters, digits, ".", "_" and "-" only');
  return options;
}

/** A record count: a whole number, 0 allowed, with an optional k (thousand) or M (million) suffix. */
function count(flag: string, text: string): number {
  const match = /^(\d+(?:\.\d+)?)([kKmM]?)$/.exec(text);
  const value = match ? Number(match[1]) * (match[2] === '' ? 1 : match[2].toLowerCase() === 'k' ? 1e3 : 1e6) : NaN;
  if (!Number.isSafeInteger(value)) throw new Error(`--${flag} takes whole numbers such as 0, 10000, 250k or 1M, got "${text}"`);
  return value;
}
