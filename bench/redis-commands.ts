import { createClient } from 'redis';

/** The few Redis commands the runner sends: whether a server answers, its CPU time, and removing the peer's keys. */

const CONNECT_TIMEOUT_MS = 1000;

/** Whether a Redis server answers PING at `url`. */
export async function redisAnswers(url: string): Promise<boolean> {
  try {
    return (await withRedis(url, (client) => client.ping())) === 'PONG';
  } catch {
    return false;
  }
}

/** The server's CPU time so far, user and system, in µs (`INFO cpu`): every client's work, not only the peer's. */
export async function redisCpuMicros(url: string): Promise<number> {
  const info = await withRedis(url, (client) => client.info('cpu'));
  const seconds = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? NaN);
  return (seconds('used_cpu_user') + seconds('used_cpu_sys')) * 1e6;
}

/** Deletes the keys matching `pattern` (SCAN, then UNLINK in batches); returns how many. */
export async function deleteRedisKeys(url: string, pattern: string): Promise<number> {
  return withRedis(url, async (client) => {
    let deleted = 0;
    for await (const keys of client.scanIterator({ MATCH: pattern, COUNT: 1000 })) if (keys.length) deleted += await client.unlink(keys);
    return deleted;
  });
}

type Client = ReturnType<typeof createClient>;

async function withRedis<T>(url: string, work: (client: Client) => Promise<T>): Promise<T> {
  // No reconnecting: a server that does not answer is an answer here.
  const client = createClient({ url, socket: { connectTimeout: CONNECT_TIMEOUT_MS, reconnectStrategy: false } });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await work(client);
  } finally {
    client.destroy();
  }
}
