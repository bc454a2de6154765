import { parseArgs } from 'node:util';

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

/** Printed by `--help` and after a bad flag. */
export const USAGE = `Usage: npm run chaos -- [flags]

  --duration <s>    seconds of traffic under faults (default 60)
  --seed <n>        seed of the traffic mix and the fault schedule (default: random, printed)
  --instances <n>   demo app instances, 2 to 8 (default 3)
  --workers <n>     concurrent traffic workers, 1 to 64 (default 24)
  --help            this text

PostgreSQL: a fresh database on the server of DATABASE_URL if set (the
restart fault is then skipped), else an embedded server started for the run.`;

/** Parses the command line; throws with a message naming the bad flag. */
export function parseChaosOptions(argv: string[]): ChaosOptions | 'help' {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      duration: { type: 'string', default: '60' },
      seed: { type: 'string' },
      instances: { type: 'string', default: '3' },
      workers: { type: 'string', default: '24' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) return 'help';
  return {
    durationSeconds: bounded('duration', values.duration, 1, 3600, false),
    // Within 2^31 so that it prints, parses and seeds the same everywhere.
    seed: values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : bounded('seed', values.seed, 0, 2 ** 31 - 1, true),
    instances: bounded('instances', values.instances, 2, 8, true),
    workers: bounded('workers', values.workers, 1, 64, true),
  };
}

function bounded(flag: string, text: string, min: number, max: number, integer: boolean): number {
  const value = Number(text);
  if (!Number.isFinite(value) || value < min || value > max || (integer && !Number.isInteger(value))) {
    throw new Error(`--${flag} must be a ${integer ? 'whole ' : ''}number from ${min} to ${max}, got "${text}"`);
  }
  return value;
}
