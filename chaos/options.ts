import { type CommandLine, type CommandLineValues, type Flag, positiveNumber, valueFlag, wholeNumber } from '../harness/command-line.js';

/** The settings of one chaos run. */
export interface ChaosOptions {
  /** Seconds of traffic (faults are injected during it). */
  durationSeconds: number;
  /** Seeds the traffic mix, the bodies, the provider faults and the fault schedule. */
  seed: number;
  /** Demo app instances behind the clients. */
  instances: number;
  /** Concurrent traffic workers, each running one scenario at a time. */
  workers: number;
}

/** The flags of `npm run chaos`; each default is written here once, and the help text comes from them. */
export const CHAOS_COMMAND_LINE = {
  command: 'npm run chaos --',
  flags: {
    duration: valueFlag({ placeholder: '<s>', description: 'seconds of traffic under faults, up to 3600', default: '60', parse: upTo(3600) }),
    // Within 2^31 so that it prints, parses and seeds the same everywhere.
    seed: valueFlag({ placeholder: '<n>', description: 'seed of the traffic mix and the fault schedule', defaultNote: 'random, printed', parse: wholeNumber(0, 2 ** 31 - 1) }),
    instances: valueFlag({ placeholder: '<n>', description: 'demo app instances, 2 to 8', default: '3', parse: wholeNumber(2, 8) }),
    workers: valueFlag({ placeholder: '<n>', description: 'concurrent traffic workers, 1 to 64', default: '24', parse: wholeNumber(1, 64) }),
  },
  footer: 'PostgreSQL: a fresh database on the server of DATABASE_URL if set (the\nrestart fault is then skipped), else an embedded server started for the run.',
} satisfies CommandLine<Record<string, Flag<unknown>>>;

/** The run's settings from the parsed flags; without `--seed`, a random one. */
export function chaosOptions(values: CommandLineValues<typeof CHAOS_COMMAND_LINE.flags>): ChaosOptions {
  return {
    durationSeconds: values.duration,
    seed: values.seed ?? Math.floor(Math.random() * 2 ** 31),
    instances: values.instances,
    workers: values.workers,
  };
}

function upTo(max: number): (text: string, name: string) => number {
  const positive = positiveNumber();
  return (text, name) => {
    const value = positive(text, name);
    if (value > max) throw new Error(`--${name} must be at most ${max}, got "${text}"`);
    return value;
  };
}
