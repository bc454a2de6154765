import type { CleanupStack } from '../harness/cleanup-stack.js';
import type { BenchAppProcess } from './child-processes.js';
import { type CpuByPid, cpuBetween, PostgresCpu } from './postgres-cpu.js';
import { redisCpuMicros } from './redis-commands.js';

/** CPU time spent during one measured phase, in µs, and per 2xx answer. */
export interface CpuCost {
  /** 2xx answers in the phase: what the CPU time is divided by. */
  answers2xx: number;
  appMicros: number;
  appMicrosPerRequest: number;
  /** Unset where PostgreSQL's processes cannot be read (see postgres-cpu.ts). */
  postgresMicros?: number;
  postgresMicrosPerRequest?: number;
  /** The peer's scenarios only: the Redis server's whole CPU time (`INFO cpu`). */
  redisMicros?: number;
  redisMicrosPerRequest?: number;
}

/** One reading of every process a scenario loads. */
interface CpuReading {
  app: number;
  postgres?: CpuByPid;
  redis?: number;
}

/** Reads the CPU time of the bench app, PostgreSQL and (for the peer) Redis, before and after a measured phase. */
export class CpuMeter {
  constructor(
    private readonly postgres: PostgresCpu | undefined,
    private readonly redisUrl: string | undefined,
  ) {}

  async read(app: BenchAppProcess, withRedis: boolean): Promise<CpuReading> {
    const [appMicros, postgres, redis] = await Promise.all([
      app.cpuMicros(),
      this.postgres?.sample(),
      withRedis && this.redisUrl ? redisCpuMicros(this.redisUrl) : undefined,
    ]);
    return { app: appMicros, postgres, redis };
  }

  /** The cost between two readings, divided by the 2xx answers of the phase they bracket. */
  static cost(before: CpuReading, after: CpuReading, answers2xx: number): CpuCost {
    const perRequest = (micros: number | undefined) => (micros === undefined || answers2xx === 0 ? undefined : round1(micros / answers2xx));
    const appMicros = Math.round(after.app - before.app);
    const postgresMicros = before.postgres && after.postgres ? Math.round(cpuBetween(before.postgres, after.postgres)) : undefined;
    const redisMicros = before.redis !== undefined && after.redis !== undefined ? Math.round(after.redis - before.redis) : undefined;
    return {
      answers2xx,
      appMicros,
      appMicrosPerRequest: perRequest(appMicros) ?? NaN,
      ...(postgresMicros !== undefined && { postgresMicros, postgresMicrosPerRequest: perRequest(postgresMicros) }),
      ...(redisMicros !== undefined && { redisMicros, redisMicrosPerRequest: perRequest(redisMicros) }),
    };
  }
}

/**
 * A meter of the bench app, PostgreSQL and, given its URL, the peer's
 * Redis. Where PostgreSQL's processes cannot be read here, it measures
 * without them and `notes` says why.
 */
export async function openCpuMeter(databaseUrl: string, redisUrl: string | undefined, cleanup: CleanupStack, notes: string[]): Promise<CpuMeter> {
  const postgres = await PostgresCpu.open(databaseUrl);
  if (typeof postgres === 'string') {
    notes.push(postgres);
    return new CpuMeter(undefined, redisUrl);
  }
  cleanup.add('PostgreSQL CPU reader', () => postgres.close());
  return new CpuMeter(postgres, redisUrl);
}

function round1(value: number): number {
  return Math.round(value * 10) / 10;
}
