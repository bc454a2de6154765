import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { backoffDelay, retryAfterMs } from './backoff.js';
import { IdempotentClient, type IdempotentClientOptions } from './idempotent-client.js';

/** What the scripted server saw of one request. */
interface SeenRequest {
  method: string;
  url: string;
  key: string | undefined;
  authorization: string | undefined;
  body: string;
}

/** Answers the `index`-th request (0-based) the server receives. */
type Script = (response: ServerResponse, index: number, request: IncomingMessage) => void;

interface ScriptedServer {
  url: string;
  seen: SeenRequest[];
}

const servers: Server[] = [];

async function startServer(script: Script): Promise<ScriptedServer> {
  const seen: SeenRequest[] = [];
  const server = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      const header = (name: string) => request.headers[name] as string | undefined;
      seen.push({ method: request.method ?? '', url: request.url ?? '', key: header('idempotency-key'), authorization: header('authorization'), body });
      script(response, seen.length - 1, request);
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

/** A URL on which nothing listens: the port was just released. */
async function closedUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

function reply(response: ServerResponse, status: number, headers: Record<string, string> = {}, body = ''): void {
  response.writeHead(status, headers).end(body);
}

/** Answers `statuses[i]` to the i-th request, then the last one forever. */
const answers =
  (...statuses: number[]): Script =>
  (response, index) =>
    reply(response, statuses[Math.min(index, statuses.length - 1)]);

/** A client whose waits are instant and recorded, and whose jitter is fixed. */
function clientFor(baseUrls: string | string[], options: Partial<IdempotentClientOptions> = {}) {
  const delays: number[] = [];
  const client = new IdempotentClient({
    baseUrls,
    sleep: async (ms) => void delays.push(ms),
    random: () => 0.5,
    ...options,
  });
  return { client, delays };
}

afterEach(async () => {
  const closing = servers.splice(0).map((server) => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  await Promise.all(closing);
});

describe('IdempotentClient', () => {
  it('reuses one generated key, body and headers on every attempt', async () => {
    const server = await startServer(answers(503, 503, 201));
    const { client } = clientFor(server.url, { headers: { Authorization: 'Bearer demo' } });

    const result = await client.send({ path: '/orders', body: { sku: 'book-42', quantity: 2 } });

    expect(result).toMatchObject({ attempts: 3, stoppedBy: 'answered', response: { status: 201 } });
    expect(result.key).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(server.seen.map((seen) => seen.key)).toEqual([result.key, result.key, result.key]);
    expect(new Set(server.seen.map((seen) => seen.body))).toEqual(new Set(['{"sku":"book-42","quantity":2}']));
    expect(server.seen.every((seen) => seen.method === 'POST' && seen.url === '/orders' && seen.authorization === 'Bearer demo')).toBe(true);
  });

  it('sends the key the caller gives, and a fresh key per operation otherwise', async () => {
    const server = await startServer(answers(201));
    const { client } = clientFor(server.url);

    const given = await client.send({ path: '/orders', key: 'order-1' });
    const first = await client.send({ path: '/orders' });
    const second = await client.send({ path: '/orders' });

    expect(given.key).toBe('order-1');
    expect(first.key).not.toBe(second.key);
    expect(server.seen.map((seen) => seen.key)).toEqual(['order-1', first.key, second.key]);
  });

  it('retries a 409, waiting at least its Retry-After', async () => {
    const server = await startServer((response, index) => (index === 0 ? reply(response, 409, { 'Retry-After': '2' }) : reply(response, 201)));
    const { client, delays } = clientFor(server.url, { random: () => 0 });

    const result = await client.send({ path: '/orders' });

    expect(result.outcomes.map((outcome) => outcome.status)).toEqual([409, 201]);
    expect(delays).toEqual([2000]);
    expect(result.outcomes[0].nextDelayMs).toBe(2000);
  });

  it('gives up when Retry-After asks for a wait past the deadline', async () => {
    const server = await startServer((response) => reply(response, 409, { 'Retry-After': '120' }));
    const { client, delays } = clientFor(server.url, { deadlineMs: 5000 });

    const result = await client.send({ path: '/orders' });

    expect(result).toMatchObject({ attempts: 1, stoppedBy: 'deadline', response: { status: 409 } });
    expect(delays).toEqual([]);
  });

  it('retries a 503 with jittered, growing backoff', async () => {
    const server = await startServer(answers(503, 503, 503, 200));
    const { client, delays } = clientFor(server.url, { baseDelayMs: 10, maxDelayMs: 1000, random: () => 0.5 });

    const result = await client.send({ method: 'PUT', path: '/orders/1', body: 'text' });

    expect(result).toMatchObject({ attempts: 4, response: { status: 200 } });
    expect(delays).toEqual([5, 10, 20]);
    expect(server.seen.every((seen) => seen.method === 'PUT' && seen.body === 'text')).toBe(true);
  });

  it('retries a reset connection', async () => {
    const server = await startServer((response, index, request) => (index === 0 ? request.socket.destroy() : reply(response, 201)));
    const { client } = clientFor(server.url);

    const result = await client.send({ path: '/orders' });

    expect(result.outcomes.map((outcome) => outcome.status)).toEqual([undefined, 201]);
    expect(result.outcomes[0].error).toMatch(/^(UND_ERR_SOCKET|ECONNRESET)$/);
    expect(server.seen.map((seen) => seen.key)).toEqual([result.key, result.key]);
  });

  it('retries a refused connection on the next base URL', async () => {
    const down = await closedUrl();
    const server = await startServer(answers(201));
    const { client } = clientFor([down, server.url]);

    const result = await client.send({ path: '/orders' });

    expect(result.outcomes).toMatchObject([
      { attempt: 1, baseUrl: down, error: 'ECONNREFUSED' },
      { attempt: 2, baseUrl: server.url, status: 201 },
    ]);
  });

  it('abandons an attempt after attemptTimeoutMs and retries it', async () => {
    const server = await startServer((response, index) => (index === 0 ? undefined : reply(response, 201)));
    const { client } = clientFor(server.url, { attemptTimeoutMs: 100 });

    const result = await client.send({ path: '/orders' });

    expect(result.outcomes).toMatchObject([{ error: 'TimeoutError' }, { status: 201 }]);
  });

  it.each([400, 401, 422, 500])('never retries a %i by default', async (status) => {
    const server = await startServer(answers(status, 201));
    const { client } = clientFor(server.url);

    const result = await client.send({ path: '/orders' });

    expect(result).toMatchObject({ attempts: 1, stoppedBy: 'answered', response: { status } });
    expect(server.seen).toHaveLength(1);
  });

  it('stops at a recorded answer even when its status is one it retries', async () => {
    const server = await startServer((response) => reply(response, 409, { 'Idempotent-Replayed': 'true', 'Content-Type': 'application/json' }, '{"code":"seat_taken"}'));
    const { client } = clientFor(server.url);

    const result = await client.send({ path: '/bookings' });

    expect(result).toMatchObject({ attempts: 1, stoppedBy: 'answered', replayed: true, response: { status: 409, json: { code: 'seat_taken' } } });
  });

  it('retries an unfinished operation (503) until its outcome is recorded', async () => {
    const unfinished = JSON.stringify({ type: 'urn:nest-idempotency:problem:operation-unfinished', status: 503 });
    const server = await startServer((response, index) =>
      index < 2 ? reply(response, 503, { 'Retry-After': '1', 'Content-Type': 'application/problem+json' }, unfinished) : reply(response, 201, { 'Idempotent-Replayed': 'true' }),
    );
    const { client, delays } = clientFor(server.url, { random: () => 0 });

    const result = await client.send({ path: '/orders/1/payments' });

    expect(result).toMatchObject({ attempts: 3, stoppedBy: 'answered', replayed: true, response: { status: 201 } });
    expect(delays).toEqual([1000, 1000]);
    expect(new Set(server.seen.map((seen) => seen.key)).size).toBe(1);
  });

  it('retries the statuses it is told to', async () => {
    const server = await startServer(answers(500, 201));
    const { client } = clientFor(server.url, { retryableStatuses: [500, 503] });

    expect(await client.send({ path: '/orders' })).toMatchObject({ attempts: 2, response: { status: 201 } });
  });

  it('stops at maxAttempts and reports every attempt', async () => {
    const server = await startServer(answers(503));
    const { client } = clientFor(server.url, { maxAttempts: 3 });

    const result = await client.send({ path: '/orders' });

    expect(result).toMatchObject({ attempts: 3, stoppedBy: 'max-attempts', response: { status: 503 } });
    expect(result.outcomes.map((outcome) => outcome.status)).toEqual([503, 503, 503]);
    expect(result.outcomes[2].nextDelayMs).toBeUndefined();
    expect(server.seen).toHaveLength(3);
  });

  it('reports the last failure when no attempt got a response', async () => {
    const { client } = clientFor(await closedUrl(), { maxAttempts: 2 });

    const result = await client.send({ path: '/orders' });

    expect(result).toMatchObject({ attempts: 2, stoppedBy: 'max-attempts', error: 'ECONNREFUSED', replayed: false });
    expect(result.response).toBeUndefined();
  });

  it('reports a replay, with the parsed JSON body', async () => {
    const body = JSON.stringify({ id: 7, sku: 'book-42' });
    const server = await startServer((response, index) =>
      reply(response, 201, { 'Content-Type': 'application/json; charset=utf-8', ...(index > 0 && { 'Idempotent-Replayed': 'true' }) }, body),
    );
    const { client } = clientFor(server.url);

    const first = await client.send({ path: '/orders', key: 'k' });
    const replay = await client.send({ path: '/orders', key: 'k' });

    expect(first).toMatchObject({ replayed: false, response: { status: 201, text: body, json: { id: 7, sku: 'book-42' } } });
    expect(replay).toMatchObject({ replayed: true, response: { status: 201, json: { id: 7 }, headers: { 'idempotent-replayed': 'true' } } });
  });

  it('spreads attempts over the base URLs in turn', async () => {
    const a = await startServer(answers(503));
    const b = await startServer(answers(503));
    const { client } = clientFor([a.url, b.url], { maxAttempts: 4 });

    const result = await client.send({ path: '/orders' });

    expect(result.outcomes.map((outcome) => outcome.baseUrl)).toEqual([a.url, b.url, a.url, b.url]);
    expect([...a.seen, ...b.seen].map((seen) => seen.key)).toEqual(Array(4).fill(result.key));
  });

  it('rejects an invalid header before any attempt', async () => {
    const server = await startServer(answers(201));
    const { client } = clientFor(server.url);

    await expect(client.send({ path: '/orders', key: 'bad\nkey' })).rejects.toThrow(/invalid header value/);
    expect(server.seen).toHaveLength(0);
  });
});

describe('backoffDelay', () => {
  const options = { baseDelayMs: 100, maxDelayMs: 1000 };

  it('draws between 0 and a ceiling that doubles per attempt, up to the cap', () => {
    const ceilings = [1, 2, 3, 4, 5, 6, 40].map((attempt) => backoffDelay(attempt, options, () => 0.999999));
    expect(ceilings).toEqual([99, 199, 399, 799, 999, 999, 999]);
    expect(backoffDelay(3, options, () => 0)).toBe(0);
    expect(backoffDelay(3, options, () => 0.25)).toBe(100);
  });

  it('stays within its bounds for any random draw', () => {
    for (let draw = 0; draw < 1; draw += 0.01) {
      for (let attempt = 1; attempt <= 12; attempt++) {
        const delay = backoffDelay(attempt, options, () => draw);
        expect(delay).toBeGreaterThanOrEqual(0);
        expect(delay).toBeLessThanOrEqual(Math.min(1000, 100 * 2 ** (attempt - 1)));
      }
    }
  });
});

describe('retryAfterMs', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');

  it.each([
    ['delta-seconds', '3', 3000],
    ['zero', '0', 0],
    ['an HTTP-date ahead', 'Thu, 01 Jan 2026 00:00:05 GMT', 5000],
    ['an HTTP-date past', 'Wed, 31 Dec 2025 23:59:00 GMT', 0],
    ['nothing', undefined, undefined],
    ['a negative number', '-1', undefined],
    ['a fraction', '1.5', undefined],
    ['garbage', 'soon', undefined],
  ])('reads %s', (_case, value, expected) => {
    expect(retryAfterMs(value, now)).toBe(expected);
  });
});
