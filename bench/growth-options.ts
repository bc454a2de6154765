import { type CommandLine, type CommandLineValues, type Flag, fileName, positiveNumber, valueFlag, wholeNumber } from '../harness/command-line.js';

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

/** The flags of `npm run bench:growth`; each default is written here once. */
export const GROWTH_COMMAND_LINE = {
  command: 'npm run bench:growth --',
  flags: {
    sizes: valueFlag({ placeholder: '<list>', description: 'records seeded before measuring, one database each; k and M suffixes allowed', default: '0,1M,10M', parse: sizeList }),
    backlog: valueFlag({ placeholder: '<n>', description: 'expired records for the reaper to delete while first executions run; 0 skips that part', default: '1M', parse: count }),
    duration: valueFlag({ placeholder: '<s>', description: 'seconds each scenario is measured per round', default: '10', parse: positiveNumber() }),
    warmup: valueFlag({ placeholder: '<s>', description: 'seconds of unmeasured load before each measurement', default: '2', parse: positiveNumber(true) }),
    // Two rounds, ascending then descending, are the smallest design in which linear drift cancels.
    rounds: valueFlag({ placeholder: '<n>', description: 'rounds; the order reverses every round, so even counts balance', default: '2', parse: wholeNumber() }),
    connections: valueFlag({ placeholder: '<n>', description: 'concurrent connections of the load generator', default: '32', parse: wholeNumber() }),
    'replay-keys': valueFlag({ placeholder: '<n>', description: 'completed keys created per size for the replay scenarios', default: '1000', parse: wholeNumber() }),
    'reaper-interval': valueFlag({ placeholder: '<ms>', description: 'reaper interval of the reaping variant', default: '100', parse: wholeNumber() }),
    'reaper-batch': valueFlag({ placeholder: '<n>', description: 'rows per reaper DELETE', default: '1000', parse: wholeNumber() }),
    'reaper-budget': valueFlag({ placeholder: '<ms>', description: 'time budget of one reaper pass', default: '2000', parse: wholeNumber() }),
    'results-name': valueFlag({ placeholder: '<name>', description: 'write bench/results/<name>.json and <name>.svg', default: 'growth', parse: fileName }),
  },
  footer: 'PostgreSQL: DATABASE_URL if set, else an embedded server started for the run.',
} satisfies CommandLine<Record<string, Flag<unknown>>>;

/** The run's settings from the parsed flags. */
export function growthOptions(values: CommandLineValues<typeof GROWTH_COMMAND_LINE.flags>): GrowthOptions {
  return {
    sizes: values.sizes,
    backlog: values.backlog,
    durationSeconds: values.duration,
    warmupSeconds: values.warmup,
    rounds: values.rounds,
    connections: values.connections,
    replayKeys: values['replay-keys'],
    reaper: { intervalMs: values['reaper-interval'], batchSize: values['reaper-batch'], timeBudgetMs: values['reaper-budget'] },
    resultsName: values['results-name'],
  };
}

/** Ascending and distinct: the smallest size is the baseline of every ratio. */
function sizeList(text: string, name: string): number[] {
  return [...new Set(text.split(',').map((item) => count(item.trim(), name)))].sort((a, b) => a - b);
}

/** A record count: a whole number, 0 allowed, with an optional k (thousand) or M (million) suffix. */
function count(text: string, name: string): number {
  const match = /^(\d+(?:\.\d+)?)([kKmM]?)$/.exec(text);
  const value = match ? Number(match[1]) * (match[2] === '' ? 1 : match[2].toLowerCase() === 'k' ? 1e3 : 1e6) : NaN;
  if (!Number.isSafeInteger(value)) throw new Error(`--${name} takes whole numbers such as 0, 10000, 250k or 1M, got "${text}"`);
  return value;
}
