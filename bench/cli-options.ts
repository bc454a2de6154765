import { parseArgs } from 'node:util';

/** The settings of one bench run. */
export interface BenchOptions {
  /** Seconds each scenario is measured in each round. */
  durationSeconds: number;
  /** Seconds of load before each measurement, not counted. */
  warmupSeconds: number;
  rounds: number;
  connections: number;
  /** Identical concurrent requests per key in the duplicate-bursts scenario. */
  burstSize: number;
  /** Completed keys created once for the replay scenarios, then cycled. */
  replayKeys: number;
  /** Only these scenario ids, when given. */
  only?: string[];
  /** Whether to run the peer's scenarios when a Redis server answers. */
  peer: boolean;
  redisUrl: string;
  /** Results go to bench/results/<name>.json and .svg. */
  resultsName: string;
}

/** Printed by `--help` and after a bad flag. */
export const USAGE = `Usage: npm run bench -- [flags]

  --duration <s>       seconds each scenario is measured per round (default 10)
  --warmup <s>         seconds of unmeasured load before each measurement (default 2)
  --rounds <n>         rounds; scenarios are interleaved within each (default 3)
  --connections <n>    concurrent connections of the load generator (default 32)
  --burst-size <n>     identical concurrent requests per key in duplicate bursts (default 4)
  --replay-keys <n>    completed keys created for the replay scenarios (default 1000)
  --only <ids>         comma-separated scenario ids: floor,bare,first,replay,bursts,peer-first,peer-replay,
                       uncached-first,uncached-replay,encrypted-first,encrypted-replay
  --no-peer            skip @node-idempotency/nestjs even when Redis answers
  --redis-url <url>    the peer's Redis (default REDIS_URL, else redis://127.0.0.1:6379)
  --results-name <n>   write bench/results/<n>.json and <n>.svg (default latest)
  --help               this text

PostgreSQL: DATABASE_URL if set, else an embedded server started for the run.`;

/** Parses the command line; throws with a message naming the bad flag. */
export function parseBenchOptions(argv: string[]): BenchOptions | 'help' {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      duration: { type: 'string', default: '10' },
      warmup: { type: 'string', default: '2' },
      rounds: { type: 'string', default: '3' },
      connections: { type: 'string', default: '32' },
      'burst-size': { type: 'string', default: '4' },
      'replay-keys': { type: 'string', default: '1000' },
      only: { type: 'string' },
      'no-peer': { type: 'boolean', default: false },
      'redis-url': { type: 'string', default: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' },
      'results-name': { type: 'string', default: 'latest' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) return 'help';
  const options: BenchOptions = {
    durationSeconds: positiveNumber('duration', values.duration),
    warmupSeconds: positiveNumber('warmup', values.warmup, true),
    rounds: positiveInteger('rounds', values.rounds),
    connections: positiveInteger('connections', values.connections),
    burstSize: positiveInteger('burst-size', values['burst-size']),
    replayKeys: positiveInteger('replay-keys', values['replay-keys']),
    only: values.only?.split(',').map((id) => id.trim()).filter(Boolean),
    peer: !values['no-peer'],
    redisUrl: values['redis-url'],
    resultsName: values['results-name'],
  };
  if (options.burstSize < 2) throw new Error('--burst-size must be at least 2: a burst is duplicates');
  if (options.connections < options.burstSize) throw new Error('--connections must be at least --burst-size');
  if (!/^[\w.-]+$/.test(options.resultsName)) throw new Error('--results-name may hold letters, digits, ".", "_" and "-" only');
  return options;
}

/** The flag's value as a number above 0 (or at least 0 when `zeroAllowed`); throws naming the flag otherwise. */
export function positiveNumber(flag: string, text: string, zeroAllowed = false): number {
  const value = Number(text);
  if (!Number.isFinite(value) || value < 0 || (!zeroAllowed && value === 0)) throw new Error(`--${flag} must be a ${zeroAllowed ? 'non-negative' : 'positive'} number, got "${text}"`);
  return value;
}

/** The flag's value as a whole number above 0; throws naming the flag otherwise. */
export function positiveInteger(flag: string, text: string): number {
  const value = positiveNumber(flag, text);
  if (!Number.isInteger(value)) throw new Error(`--${flag} must be a whole number, got "${text}"`);
  return value;
}
