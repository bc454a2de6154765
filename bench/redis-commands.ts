import { connect, type Socket } from 'node:net';

/**
 * A few Redis commands over a plain socket, for the runner: whether a server
 * answers, and removing the peer's keys afterwards. The redis client package
 * is only a dependency of the peer's adapter, not one of this project.
 */

type Reply = string | number | null | Reply[] | Error;

const CONNECT_TIMEOUT_MS = 1000;

/** Whether a Redis server answers PING at `url`. */
export async function redisAnswers(url: string): Promise<boolean> {
  try {
    return (await withRedis(url, (send) => send('PING'))) === 'PONG';
  } catch {
    return false;
  }
}

/** Deletes the keys matching `pattern` (SCAN, then UNLINK in batches); returns how many. */
export async function deleteRedisKeys(url: string, pattern: string): Promise<number> {
  return withRedis(url, async (send) => {
    let cursor = '0';
    let deleted = 0;
    do {
      const [next, keys] = (await send('SCAN', cursor, 'MATCH', pattern, 'COUNT', '1000')) as [string, string[]];
      if (keys.length) deleted += (await send('UNLINK', ...keys)) as number;
      cursor = next;
    } while (cursor !== '0');
    return deleted;
  });
}

type Send = (...args: string[]) => Promise<Reply>;

async function withRedis<T>(url: string, work: (send: Send) => Promise<T>): Promise<T> {
  const target = new URL(url);
  const socket = await open(target.hostname || '127.0.0.1', Number(target.port || 6379));
  let buffered = Buffer.alloc(0);
  let waiting: { resolve: (reply: Reply) => void; reject: (error: Error) => void } | undefined;
  socket.on('data', (chunk) => {
    buffered = Buffer.concat([buffered, chunk]);
    if (!waiting) return;
    const { resolve, reject } = waiting;
    let parsed: ReturnType<typeof parseReply>;
    try {
      parsed = parseReply(buffered, 0);
    } catch (error) {
      waiting = undefined;
      reject(error as Error);
      return;
    }
    if (!parsed) return;
    buffered = buffered.subarray(parsed.next);
    waiting = undefined;
    if (parsed.value instanceof Error) reject(parsed.value);
    else resolve(parsed.value);
  });
  socket.on('error', (error) => waiting?.reject(error));
  const send: Send = (...args) =>
    new Promise((resolve, reject) => {
      waiting = { resolve, reject };
      socket.write(`*${args.length}\r\n${args.map((arg) => `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`).join('')}`);
    });
  try {
    if (target.password) await send('AUTH', ...(target.username ? [decodeURIComponent(target.username)] : []), decodeURIComponent(target.password));
    const database = target.pathname.replace(/^\//, '');
    if (database) await send('SELECT', database);
    return await work(send);
  } finally {
    socket.destroy();
  }
}

function open(host: string, port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    socket.setTimeout(CONNECT_TIMEOUT_MS, () => socket.destroy(new Error(`no answer from Redis at ${host}:${port}`)));
    socket.once('connect', () => {
      socket.setTimeout(0);
      resolve(socket);
    });
    socket.once('error', reject);
  });
}

/** One RESP2 reply from `offset`, or undefined while it is incomplete. */
function parseReply(buffer: Buffer, offset: number): { value: Reply; next: number } | undefined {
  const lineEnd = buffer.indexOf('\r\n', offset);
  if (lineEnd < 0) return undefined;
  const type = String.fromCharCode(buffer[offset]);
  const line = buffer.toString('utf8', offset + 1, lineEnd);
  const afterLine = lineEnd + 2;
  switch (type) {
    case '+':
      return { value: line, next: afterLine };
    case '-':
      return { value: new Error(line), next: afterLine };
    case ':':
      return { value: Number(line), next: afterLine };
    case '$': {
      const length = Number(line);
      if (length < 0) return { value: null, next: afterLine };
      if (buffer.length < afterLine + length + 2) return undefined;
      return { value: buffer.toString('utf8', afterLine, afterLine + length), next: afterLine + length + 2 };
    }
    case '*': {
      const count = Number(line);
      if (count < 0) return { value: null, next: afterLine };
      const items: Reply[] = [];
      let next = afterLine;
      for (let i = 0; i < count; i++) {
        const item = parseReply(buffer, next);
        if (!item) return undefined;
        items.push(item.value);
        next = item.next;
      }
      return { value: items, next };
    }
    default:
      throw new Error(`unexpected Redis reply type "${type}"`);
  }
}
