import type { LoggerService } from '@nestjs/common';
import { connect, type NatsConnection, type NodeConnectionOptions } from '@nats-io/transport-node';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Attempts 500 ms apart, doubling up to 10 s, each wait jittered down to
 * half: a line per attempt stays readable through a long outage, and
 * instances started together do not retry together.
 */
const RETRY_BASE_MS = 500;
const RETRY_MAX_MS = 10_000;

/**
 * Every server of `servers`, which may be one URL, a list, or a
 * comma-separated string of URLs (as NATS's Go client and CLI take one).
 * The JavaScript client takes a string as one server, and of
 * `nats://a:4222,nats://b:4222` would keep only the last.
 */
function serverList(servers: string | string[]): string[] {
  return [servers]
    .flat()
    .flatMap((entry) => entry.split(','))
    .map((server) => server.trim())
    .filter(Boolean);
}

export interface RetriedConnectionOptions {
  /** Passed to `connect()`, its servers through `serverList()`; by default the connection reconnects for ever once established. */
  connection: NodeConnectionOptions & { servers: string | string[] };
  /** Runs on every new connection before it is handed out (the stream, the consumers), so it must be idempotent. */
  setUp: (connection: NatsConnection) => Promise<void>;
  logger: Pick<LoggerService, 'log' | 'warn'>;
  /** Aborted, it stops the retries (a connection whose set-up had begun is still handed out, for the caller to close). */
  signal: AbortSignal;
}

export interface RetriedConnection {
  /** Settles once the first attempt connected or failed: a caller can start either way. */
  firstAttempt: Promise<void>;
  /** The connection once set up; undefined when stopped before. Never rejects. */
  ready: Promise<NatsConnection | undefined>;
}

/**
 * Connects to NATS and sets the connection up, and while no server answers
 * or the set-up fails (JetStream not ready yet, say) tries again with
 * backoff, one warning per failed attempt. A process started before its
 * broker thus starts and waits for it, rather than exiting; once set up,
 * the NATS client itself rides out later outages.
 */
export function connectWithRetry(options: RetriedConnectionOptions): RetriedConnection {
  const { signal, logger } = options;
  const connectionOptions = { maxReconnectAttempts: -1, reconnectTimeWait: 500, ...options.connection, servers: serverList(options.connection.servers) };
  const servers = connectionOptions.servers.join(', ');
  let firstAttemptDone!: () => void;
  const firstAttempt = new Promise<void>((resolve) => (firstAttemptDone = resolve));
  const retryAfter = async (attempt: number, failure: string, error: unknown) => {
    const delay = Math.round(Math.min(RETRY_MAX_MS, RETRY_BASE_MS * 2 ** (attempt - 1)) * (0.5 + Math.random() / 2));
    logger.warn(`${failure} (attempt ${attempt}: ${(error as Error).message}); next attempt in ${delay} ms`);
    firstAttemptDone();
    await sleep(delay, undefined, { signal }).catch(() => undefined);
  };
  const ready = (async () => {
    for (let attempt = 1; !signal.aborted; attempt++) {
      let connection: NatsConnection;
      try {
        connection = await connect(connectionOptions);
      } catch (error) {
        await retryAfter(attempt, `NATS at ${servers} is not reachable`, error);
        continue;
      }
      if (signal.aborted) {
        await connection.close().catch(() => undefined);
        break;
      }
      try {
        await options.setUp(connection);
      } catch (error) {
        await connection.close().catch(() => undefined);
        await retryAfter(attempt, `setting up on NATS at ${servers} failed`, error);
        continue;
      }
      if (attempt > 1) logger.log(`connected to NATS at ${servers} after ${attempt - 1} failed ${attempt === 2 ? 'attempt' : 'attempts'}`);
      firstAttemptDone();
      return connection;
    }
    firstAttemptDone();
    return undefined;
  })();
  return { firstAttempt, ready };
}
