import { execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import pg from 'pg';

/** CPU time in µs of each process, by pid. */
export type CpuByPid = Map<number, number>;

/**
 * The CPU time of the PostgreSQL processes that serve the bench, read from
 * /proc (so only where the server runs on this machine): the backends of the
 * bench database (the app's pool, autovacuum workers) and the server's
 * background processes (WAL writer, checkpointer, …). On a server of the
 * run's own that is all its work; on a shared one, the background processes
 * also work for other databases.
 */
export class PostgresCpu {
  private constructor(
    private readonly client: pg.Client,
    private readonly ticksPerSecond: number,
  ) {}

  /** A reader on `databaseUrl`, or undefined (with the reason) when the server's processes cannot be read here. */
  static async open(databaseUrl: string): Promise<PostgresCpu | string> {
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    const reader = new PostgresCpu(client, clockTicksPerSecond());
    const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    if ((await readProcessCpu(rows[0].pid, reader.ticksPerSecond)) === undefined) {
      await client.end();
      return `PostgreSQL's processes are not readable in /proc here (a server on another machine or in a container): no PostgreSQL CPU figures.`;
    }
    return reader;
  }

  /** CPU time so far of every process serving the bench database, but this reader's own backend. */
  async sample(): Promise<CpuByPid> {
    const { rows } = await this.client.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND (datname = current_database() OR datname IS NULL)`,
    );
    // All at once, so that the sample is of one moment, as near as can be to the other readings it goes with.
    const readings = await Promise.all(rows.map(async ({ pid }) => [pid, await readProcessCpu(pid, this.ticksPerSecond)] as const));
    return new Map(readings.filter((reading): reading is readonly [number, number] => reading[1] !== undefined));
  }

  close(): Promise<void> {
    return this.client.end();
  }
}

/** CPU spent between two samples: a process that started in between counts whole, one that ended in between is lost. */
export function cpuBetween(before: CpuByPid, after: CpuByPid): number {
  let micros = 0;
  for (const [pid, total] of after) micros += total - (before.get(pid) ?? 0);
  return micros;
}

/**
 * The CPU time of a process so far, in µs, or undefined when it cannot be
 * read: the scheduler's own count in nanoseconds (`/proc/<pid>/schedstat`)
 * where the kernel keeps it, else utime + stime from `/proc/<pid>/stat`,
 * counted in clock ticks (10 ms): over a window of 2 s and a dozen
 * processes, ticks alone would move PostgreSQL's figure by several percent.
 */
async function readProcessCpu(pid: number, ticksPerSecond: number): Promise<number | undefined> {
  const scheduled = await readFile(`/proc/${pid}/schedstat`, 'utf8').catch(() => undefined);
  // Its first field is the time spent running, user and system together.
  const nanos = Number(scheduled?.split(' ')[0]);
  if (scheduled !== undefined && Number.isFinite(nanos)) return nanos / 1000;
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces; the fields after its closing parenthesis do not.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 14 and 15 of the line, utime and stime, are the 12th and 13th after the name.
    return ((Number(fields[11]) + Number(fields[12])) / ticksPerSecond) * 1e6;
  } catch {
    return undefined;
  }
}

function clockTicksPerSecond(): number {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
}
