import type { Replication } from '../harness/replica-pair.js';
import { type CommandLine, type CommandLineValues, type Flag, valueFlag, wholeNumber } from '../harness/command-line.js';

/** The settings of one failover run. */
export interface FailoverOptions {
  replication: Replication;
  /** Seconds of traffic; the failover comes at `failoverAt` of them. */
  durationSeconds: number;
  /** Share of the duration after which the primary is killed. */
  failoverAt: number;
  /** How long replication is stalled (the primary's WAL senders stopped) before the kill: the standby's lag at the failover. */
  stallMs: number;
  seed: number;
  instances: number;
  workers: number;
}

const REPLICATIONS: readonly Replication[] = ['synchronous', 'asynchronous'];

/** The flags of `npm run chaos:failover`; each default is written here once. */
export const FAILOVER_COMMAND_LINE = {
  command: 'npm run chaos:failover --',
  flags: {
    replication: valueFlag({ placeholder: '<mode>', description: `the standby's replication: ${REPLICATIONS.join(', ')}`, default: 'synchronous', parse: replication }),
    duration: valueFlag({ placeholder: '<s>', description: 'seconds of traffic, 10 to 600', default: '30', parse: wholeNumber(10, 600) }),
    stall: valueFlag({ placeholder: '<ms>', description: "replication stalled this long before the kill: the standby's lag", default: '1000', parse: wholeNumber(0, 60_000) }),
    seed: valueFlag({ placeholder: '<n>', description: 'seed of the traffic mix', defaultNote: 'random, printed', parse: wholeNumber(0, 2 ** 31 - 1) }),
    instances: valueFlag({ placeholder: '<n>', description: 'demo app instances, 1 to 8', default: '2', parse: wholeNumber(1, 8) }),
    workers: valueFlag({ placeholder: '<n>', description: 'concurrent traffic workers, 1 to 64', default: '16', parse: wholeNumber(1, 64) }),
  },
  footer: "PostgreSQL: a primary and a streaming standby of the run's own (Debian's\nPostgreSQL 15, or POSTGRES_BIN_DIR), behind an HAProxy of its own (HAPROXY_BINARY).",
} satisfies CommandLine<Record<string, Flag<unknown>>>;

/** The run's settings from the parsed flags; without `--seed`, a random one. The failover comes at 40% of the traffic. */
export function failoverOptions(values: CommandLineValues<typeof FAILOVER_COMMAND_LINE.flags>): FailoverOptions {
  return {
    replication: values.replication,
    durationSeconds: values.duration,
    failoverAt: 0.4,
    stallMs: values.stall,
    seed: values.seed ?? Math.floor(Math.random() * 2 ** 31),
    instances: values.instances,
    workers: values.workers,
  };
}

function replication(text: string, name: string): Replication {
  if (!REPLICATIONS.includes(text as Replication)) throw new Error(`--${name} must be one of ${REPLICATIONS.join(', ')}, got "${text}"`);
  return text as Replication;
}
