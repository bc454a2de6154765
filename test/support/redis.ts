import { Redis } from 'ioredis';
import { once } from 'node:events';
import { type AddressInfo, createConnection, createServer, type Socket } from 'node:net';

/** The Redis the shared rate limit suite uses: REDIS_URL, default the machine's. */
export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

/** Whether a Redis answers PING at the URL within a second. */
export async function redisAnswers(url = REDIS_URL): Promise<boolean> {
  const redis = new Redis(url, { lazyConnect: true, connectTimeout: 1000, maxRetriesPerRequest: 0, retryStrategy: () => null });
  redis.on('error', () => {});
  try {
    await redis.connect();
    return (await redis.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    redis.disconnect();
  }
}

/**
 * A TCP stand-in for Redis: it passes bytes both ways to `target` until
 * `freeze()`, then swallows them, connections left open. Without a target it
 * swallows from the start: a server that accepts and never answers.
 */
export interface SilentRedis {
  url: string;
  freeze(): void;
  close(): Promise<void>;
}

export async function silentRedis(target?: string): Promise<SilentRedis> {
  let frozen = !target;
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on('error', () => socket.destroy());
    socket.on('close', () => sockets.delete(socket));
    return socket;
  };
  const server = createServer((client) => {
    track(client);
    if (!target) return client.resume();
    const { hostname, port } = new URL(target);
    const upstream = track(createConnection({ host: hostname, port: Number(port || 6379) }));
    const relay = (from: Socket, to: Socket) => from.on('data', (chunk) => frozen || to.write(chunk));
    relay(client, upstream);
    relay(upstream, client);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `redis://127.0.0.1:${(server.address() as AddressInfo).port}`,
    freeze: () => (frozen = true),
    close: async () => {
      for (const socket of sockets) socket.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}
