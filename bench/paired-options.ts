import { type CommandLine, type CommandLineValues, type Flag, fileName, list, positiveNumber, switchFlag, text, valueFlag, wholeNumber } from '../harness/command-line.js';
import { PAIRED_PROFILES, type PairedProfileName } from './paired-schedule.js';
import type { ScenarioId } from './scenarios.js';

/** `--profile`'s value: one of `PAIRED_PROFILES`' names. */
export function profileName(value: string, name: string): PairedProfileName {
  if (!Object.hasOwn(PAIRED_PROFILES, value)) throw new Error(`--${name} must be one of ${Object.keys(PAIRED_PROFILES).join(', ')}, got "${value}"`);
  return value as PairedProfileName;
}

/** The flags of `npm run bench` (the paired method); each default is written here once, and the help text comes from them. */
export const PAIRED_COMMAND_LINE = {
  command: 'npm run bench --',
  flags: {
    profile: valueFlag({
      placeholder: '<name>',
      description: "what to run: default (every comparison) or harness (the outside harness's handler, an order and an outbox row: bare, the module's default and the peer, their replays; see bench/README.md)",
      default: 'default',
      parse: profileName,
    }),
    pairs: valueFlag({ placeholder: '<n>', description: 'pairs per comparison: cycles of the schedule, every other one reversed (an even count balances the orders)', default: '20', parse: wholeNumber() }),
    window: valueFlag({ placeholder: '<s>', description: 'seconds each window is measured', default: '2', parse: positiveNumber() }),
    settle: valueFlag({ placeholder: '<s>', description: "seconds of a window's load before it is measured", default: '0.5', parse: positiveNumber(true) }),
    warmup: valueFlag({ placeholder: '<s>', description: 'seconds of unmeasured load on each variant before the first window', default: '1', parse: positiveNumber(true) }),
    connections: valueFlag({ placeholder: '<n>', description: 'concurrent connections of the load generator, open for the whole run', default: '32', parse: wholeNumber() }),
    pool: valueFlag({ placeholder: '<n>', description: "connections in the bench app's pool", default: '10', parse: wholeNumber() }),
    'replay-keys': valueFlag({ placeholder: '<n>', description: 'completed keys created for each replay variant', default: '1000', parse: wholeNumber() }),
    only: valueFlag({ placeholder: '<ids>', description: 'comma-separated variant ids to run (see bench/README.md): their comparisons alone, in a shorter walk', defaultNote: 'all', parse: list }),
    'no-pipeline': switchFlag("node-postgres pipelining off on the bench app's DataSource (on in the demo's): as a DataSource with pg's defaults sends"),
    'no-peer': switchFlag('skip @node-idempotency/nestjs even when Redis answers'),
    'redis-url': valueFlag({ placeholder: '<url>', description: "the peer's Redis", default: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', defaultNote: 'REDIS_URL, else redis://127.0.0.1:6379', parse: text }),
    'results-name': valueFlag({
      placeholder: '<name>',
      description: 'write bench/results/<name>.json and <name>.svg',
      defaultNote: `the profile's: ${Object.values(PAIRED_PROFILES)
        .map((profile) => `${profile.resultsName} (${profile.name})`)
        .join(', ')}`,
      parse: fileName,
    }),
  },
  footer: 'PostgreSQL: DATABASE_URL if set, else an embedded server started for the run. The round-based scenarios: npm run bench:rounds -- --help.',
} satisfies CommandLine<Record<string, Flag<unknown>>>;

/** The settings of one paired run. */
export interface PairedOptions {
  /** The variants, comparisons and walk (`PAIRED_PROFILES`). */
  profile: PairedProfileName;
  /** Cycles of the schedule: each comparison gets about this many pairs. */
  pairs: number;
  windowSeconds: number;
  /** Seconds of each window's load before it is measured, so that the previous variant's work has drained. */
  settleSeconds: number;
  /** Seconds of load on each variant, once, before the first window. */
  warmupSeconds: number;
  connections: number;
  /** Connections in the bench app's pool (the DataSource's `extra.max`). */
  poolSize: number;
  /** Completed keys created once for each replay variant, then cycled. */
  replayKeys: number;
  /** The variants to run, by id; all when unset. */
  only?: ScenarioId[];
  /** node-postgres pipelining on the bench app's DataSource. */
  pipeline: boolean;
  /** Whether to load the peer when a Redis server answers. */
  peer: boolean;
  redisUrl: string;
  /** Results go to bench/results/<name>.json and .svg. */
  resultsName: string;
}

/** The run's settings from the parsed flags. */
export function pairedOptions(values: CommandLineValues<typeof PAIRED_COMMAND_LINE.flags>): PairedOptions {
  return {
    profile: values.profile,
    pairs: values.pairs,
    windowSeconds: values.window,
    settleSeconds: values.settle,
    warmupSeconds: values.warmup,
    connections: values.connections,
    poolSize: values.pool,
    replayKeys: values['replay-keys'],
    only: values.only as ScenarioId[] | undefined,
    pipeline: !values['no-pipeline'],
    peer: !values['no-peer'],
    redisUrl: values['redis-url'],
    resultsName: values['results-name'] ?? PAIRED_PROFILES[values.profile].resultsName,
  };
}
