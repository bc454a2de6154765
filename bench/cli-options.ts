import { type CommandLine, type CommandLineValues, type Flag, fileName, list, positiveNumber, switchFlag, text, valueFlag, wholeNumber } from '../harness/command-line.js';
import { SCENARIOS } from './scenarios.js';

/** The flags of `npm run bench:rounds`; each default is written here once, and the help text comes from them. */
export const BENCH_COMMAND_LINE = {
  command: 'npm run bench:rounds --',
  flags: {
    duration: valueFlag({ placeholder: '<s>', description: 'seconds each scenario is measured per round', default: '10', parse: positiveNumber() }),
    warmup: valueFlag({ placeholder: '<s>', description: 'seconds of unmeasured load before each measurement', default: '2', parse: positiveNumber(true) }),
    rounds: valueFlag({ placeholder: '<n>', description: 'rounds; scenarios are interleaved, in reverse every other round (an even count balances)', default: '4', parse: wholeNumber() }),
    connections: valueFlag({ placeholder: '<n>', description: 'concurrent connections of the load generator', default: '32', parse: wholeNumber() }),
    pool: valueFlag({ placeholder: '<n>', description: "connections in each bench app's pool", default: '10', parse: wholeNumber() }),
    'burst-size': valueFlag({ placeholder: '<n>', description: 'identical concurrent requests per key in duplicate bursts', default: '4', parse: wholeNumber(2) }),
    'replay-keys': valueFlag({ placeholder: '<n>', description: 'completed keys created for each replay scenario', default: '1000', parse: wholeNumber() }),
    only: valueFlag({ placeholder: '<ids>', description: `comma-separated scenario ids: ${SCENARIOS.map((scenario) => scenario.id).join(',')}`, defaultNote: 'all', parse: list }),
    'no-peer': switchFlag('skip @node-idempotency/nestjs even when Redis answers'),
    'redis-url': valueFlag({ placeholder: '<url>', description: "the peer's Redis", default: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', defaultNote: 'REDIS_URL, else redis://127.0.0.1:6379', parse: text }),
    'results-name': valueFlag({ placeholder: '<name>', description: 'write bench/results/<name>.json and <name>.svg', default: 'latest', parse: fileName }),
  },
  footer: 'PostgreSQL: DATABASE_URL if set, else an embedded server started for the run.',
} satisfies CommandLine<Record<string, Flag<unknown>>>;

/** The settings of one bench run. */
export interface BenchOptions {
  /** Seconds each scenario is measured in each round. */
  durationSeconds: number;
  /** Seconds of load before each measurement, not counted. */
  warmupSeconds: number;
  rounds: number;
  connections: number;
  /** Connections in each bench app's pool (the DataSource's `extra.max`). */
  poolSize: number;
  /** Identical concurrent requests per key in the duplicate-bursts scenario. */
  burstSize: number;
  /** Completed keys created once for each replay scenario, then cycled. */
  replayKeys: number;
  /** Only these scenario ids, when given. */
  only?: string[];
  /** Whether to run the peer's scenarios when a Redis server answers. */
  peer: boolean;
  redisUrl: string;
  /** Results go to bench/results/<name>.json and .svg. */
  resultsName: string;
}

/** The run's settings from the parsed flags; throws on flags that contradict each other or name unknown scenarios. */
export function benchOptions(values: CommandLineValues<typeof BENCH_COMMAND_LINE.flags>): BenchOptions {
  const unknown = values.only?.filter((id) => !SCENARIOS.some((scenario) => scenario.id === id)) ?? [];
  if (unknown.length) throw new Error(`--only: unknown scenario ids ${unknown.join(', ')}`);
  if (values.connections < values['burst-size']) throw new Error('--connections must be at least --burst-size');
  return {
    durationSeconds: values.duration,
    warmupSeconds: values.warmup,
    rounds: values.rounds,
    connections: values.connections,
    poolSize: values.pool,
    burstSize: values['burst-size'],
    replayKeys: values['replay-keys'],
    only: values.only,
    peer: !values['no-peer'],
    redisUrl: values['redis-url'],
    resultsName: values['results-name'],
  };
}
