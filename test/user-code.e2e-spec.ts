import multipart from '@fastify/multipart';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import request from 'supertest';
import { OutgoingMessage, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { IdempotencyModule, type IdempotencyModuleOptions, TransactionClosedError } from '../src/idempotency/index.js';
import { IdempotencyOutboxModule } from '../src/idempotency/outbox/index.js';
import { HTTP_ADAPTERS, startApp, type RunningApp } from './support/http-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { lateErrors, providerCalls, TENANT_SCHEMA, USER_ROWS_SCHEMA, userCodeModules } from './support/user-code-app.js';

/**
 * Ordinary user code under `@Idempotent()` with the module's default
 * options, as a review found it broken: each case is what an app does
 * without thinking of the module (a provider call before the write, a
 * passthrough status, a raw write, an upload, a late timer, two units at
 * once, a caught unique violation, a background flusher), and what it must
 * get: one execution per key, the answer it sent, and its writes where it
 * meant them to go.
 */
describe.each(HTTP_ADAPTERS)('ordinary user code with the default options (%s)', (adapter) => {
  let db: TestDatabase;
  let one: RunningApp;
  let two: RunningApp;
  let seq = 0;
  const unique = (label: string) => `${label}-${adapter}-${++seq}-${Date.now()}`;
  const post = (app: RunningApp, path: string, key: string, body: object) => Promise.resolve(request(app.url).post(`/user-code/${path}`).set('Idempotency-Key', key).send(body));
  // Node's response prototypes, shared by every response of the process, as they were before any request.
  const nodeWrites = [ServerResponse.prototype, OutgoingMessage.prototype].map(ownWrites);
  const rowsLabelled = async (pattern: string) => (await db.query<{ label: string }>(`SELECT label FROM user_rows WHERE label LIKE $1 ORDER BY label`, [pattern])).map((row) => row.label);
  const start = (options: Partial<IdempotencyModuleOptions> = {}, poolSize = 8) =>
    startApp(
      { imports: userCodeModules(db.url, adapter, poolSize, [IdempotencyModule.forRoot({ tenant: 'shared', reaper: false, ...options }), IdempotencyOutboxModule.forRoot({})]) },
      { adapter, configure: (app) => adapter === 'fastify' && void (app as NestFastifyApplication).register(multipart) },
    );

  beforeAll(async () => {
    db = await createTestDatabase();
    one = await start();
    await db.query(USER_ROWS_SCHEMA);
    two = await start();
  });
  afterAll(async () => {
    await one?.close();
    await two?.close();
    await db?.drop();
  });

  describe('one execution per key', () => {
    it('runs a handler that calls a provider before it writes once for 20 concurrent duplicates', async () => {
      const label = unique('burst');
      const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => post(i % 2 ? two : one, 'charge', label, { label })));
      expect(answers.map((answer) => answer.status)).toEqual(Array(20).fill(201));
      expect(new Set(answers.map((answer) => answer.text)).size).toBe(1);
      expect(providerCalls.get(label)).toBe(1);
      expect(await rowsLabelled(label)).toEqual([label]);
    });

    it.each([
      ['on', undefined],
      ['off', { replayCacheSize: 0 }],
    ] as const)('runs it once for a first request and 10 sequential retries alternating between two instances (replay cache %s)', async (_, options) => {
      const [a, b] = options ? [await start(options), await start(options)] : [one, two];
      try {
        const label = unique('sequential');
        const answers = [];
        for (let i = 0; i < 11; i++) answers.push(await post(i % 2 ? b : a, 'charge', label, { label }));
        expect(answers.map((answer) => answer.status)).toEqual(Array(11).fill(201));
        expect(answers.slice(1).every((answer) => answer.headers['idempotent-replayed'] === 'true')).toBe(true);
        expect(providerCalls.get(label)).toBe(1);
      } finally {
        if (a !== one) await Promise.all([a.close(), b.close()]);
      }
    });
  });

  it('records and replays the status a passthrough handler set', async () => {
    const key = unique('accepted');
    const first = await post(one, 'accepted', key, { label: key });
    expect(first.status).toBe(202);
    for (const app of [one, two]) {
      const replay = await post(app, 'accepted', key, { label: key });
      expect(replay.status).toBe(202);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(first.text);
    }
  });

  describe('a handler that writes the response itself', () => {
    it.each(['send', 'write', 'stream'])('gets a 500 problem and its writes roll back: %s', async (how) => {
      const label = unique(`raw-${how}`);
      for (let attempt = 0; attempt < 2; attempt++) {
        const answer = await post(one, `raw/${how}`, label, { label, how });
        expect(answer.status).toBe(500);
        expect(answer.headers['content-type']).toMatch(/^application\/problem\+json/);
        expect(answer.body).toMatchObject({ type: 'urn:nest-idempotency:problem:unstorable-response' });
        expect(answer.text).not.toContain('by the handler');
      }
      await sleep(50); // a stream still writing into the answered response
      expect(await rowsLabelled(label)).toEqual([]);
    });
  });

  it('leaves Node’s response prototypes, which every server of the process shares, as it found them', async () => {
    const label = unique('prototypes');
    expect((await post(one, 'accepted', label, { label })).status).toBe(202);
    expect((await post(one, 'accepted', label, { label })).headers['idempotent-replayed']).toBe('true');
    const raw = unique('prototypes-raw');
    expect((await post(one, 'raw/write', raw, { label: raw, how: 'write' })).status).toBe(500);
    expect([ServerResponse.prototype, OutgoingMessage.prototype].map(ownWrites)).toEqual(nodeWrites);
  });

  describe('one answer, whatever the replay cache holds', () => {
    // Pairs a parser may read as one value, or JSON.stringify may write as one text: the second of each, with the first's key.
    const pairs = [
      ['{"note":null}', '{"note":1e400}'],
      ['{"a":[null]}', '{"a":[-1e999]}'],
      ['{"n":1}', '{"n":1.0}'],
      ['{"n":0}', '{"n":-0}'],
      ['{"s":"x"}', '{"s":"\\ud800"}'],
      ['{"a":1,"b":2}', '{"b":2,"a":1}'],
      ['{"a":"1"}', '{"a":1}'],
    ];
    const send = (app: RunningApp, key: string, json: string) =>
      Promise.resolve(request(app.url).post('/user-code/any-json').set('Idempotency-Key', key).set('Content-Type', 'application/json').send(json));
    const answerOf = (answer: request.Response) => `${answer.status}${answer.headers['idempotent-replayed'] === 'true' ? ' replayed' : ''}`;

    it('answers the second of each pair alike from a warm cache, without a cache, and from another instance’s cold one', async () => {
      const [uncached, cold] = [await start({ replayCacheSize: 0 }), await start()];
      try {
        for (const [first, second] of pairs) {
          const answers: Record<string, string> = {};
          for (const [name, firstApp, secondApp] of [
            ['warm', one, one],
            ['off', uncached, uncached],
            ['cold', one, cold],
          ] as const) {
            const key = unique('cache');
            expect((await send(firstApp, key, first)).status).toBe(201);
            answers[name] = answerOf(await send(secondApp, key, second));
          }
          expect({ second, ...answers }).toEqual({ second, warm: answers.off, off: answers.off, cold: answers.off });
        }
      } finally {
        await Promise.all([uncached.close(), cold.close()]);
      }
    });
  });

  describe('every body is fingerprinted', () => {
    it('tells text bodies apart, however the handler reads them', async () => {
      const key = unique('text');
      const send = (text: string) => Promise.resolve(request(one.url).post('/user-code/text').set('Idempotency-Key', key).set('Content-Type', 'text/plain').send(text));
      const first = await send('pay 10 to alice');
      expect(first.status).toBe(201);
      expect(first.body).toEqual({ text: 'pay 10 to alice' });
      expect((await send('pay 99 to mallory')).status).toBe(422);
      const replay = await send('pay 10 to alice');
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(first.text);
    });

    it.runIf(adapter === 'express')('tells binary bodies apart, and leaves them whole for the handler', async () => {
      const key = unique('binary');
      const bytes = Buffer.from(Array.from({ length: 200_000 }, (_, i) => i % 251));
      const send = (body: Buffer) => Promise.resolve(request(one.url).post('/user-code/text').set('Idempotency-Key', key).set('Content-Type', 'application/octet-stream').send(body));
      const first = await send(bytes);
      expect(first.status).toBe(201);
      expect(Buffer.from(first.body.text, 'utf8').length).toBeGreaterThan(0);
      const changed = Buffer.from(bytes);
      changed[150_000] ^= 1;
      expect((await send(changed)).status).toBe(422);
      expect((await send(bytes)).headers['idempotent-replayed']).toBe('true');
    });

    it('tells multipart uploads apart, whatever boundary each attempt draws', async () => {
      const key = unique('upload');
      const upload = (content: string, amount: string) =>
        Promise.resolve(request(one.url).post('/user-code/upload').set('Idempotency-Key', key).field('amount', amount).attach('file', Buffer.from(content), 'invoice.txt'));
      const first = await upload('invoice A', '10');
      expect(first.status).toBe(201);
      expect(first.body).toEqual({ name: 'invoice.txt', size: 9, amount: '10' });
      expect((await upload('invoice B', '10')).status).toBe(422);
      expect((await upload('invoice A', '20')).status).toBe(422);
      const replay = await upload('invoice A', '10');
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(first.text);
    });
  });

  describe('writes go where the code that made them expects', () => {
    it('refuses an outbox write the handler did not await, and never lets it into another request’s transaction', async () => {
      const small = await start({}, 2);
      try {
        lateErrors.length = 0;
        const label = unique('late');
        const other = unique('slow');
        const [failed, slow] = await Promise.all([post(small, 'late-event', label, { label }), post(small, 'slow-event', other, { label: other, holdMs: 200 })]);
        expect(failed.status).toBe(500);
        expect(slow.status).toBe(201);
        for (let i = 0; i < 50 && lateErrors.length === 0; i++) await sleep(10);
        expect(lateErrors).toEqual([expect.any(TransactionClosedError)]);
        const events = await db.query<{ type: string; payload: { label: string } }>(`SELECT type, payload FROM idempotency_outbox WHERE payload->>'label' IN ($1, $2)`, [label, other]);
        expect(events).toEqual([{ type: 'slow', payload: { label: other, holdMs: 200 } }]);
      } finally {
        await small.close();
      }
    });

    it('commits a write the handler started without awaiting with the request, and rolls it back with a failed one', async () => {
      const label = unique('unawaited');
      expect((await post(one, 'unawaited', label, { label })).status).toBe(201);
      expect(await rowsLabelled(label)).toEqual([label]);
      const failed = unique('unawaited-failed');
      expect((await post(one, 'unawaited', failed, { label: failed, fail: true })).status).toBe(500);
      expect(await rowsLabelled(failed)).toEqual([]);
    });

    it('runs two dataSource.transaction() units at once as two transactions would: one fails alone', async () => {
      const label = unique('settled');
      const answer = await post(one, 'units/all-settled', label, { label });
      expect(answer.status).toBe(201);
      expect(answer.body).toEqual(['fulfilled', 'rejected']);
      expect(await rowsLabelled(`${label}:%`)).toEqual([`${label}:kept`]);
    });

    it('runs Promise.all of units, each with a nested unit', async () => {
      const label = unique('all');
      expect((await post(one, 'units/all', label, { label })).status).toBe(201);
      expect(await rowsLabelled(`${label}:%`)).toEqual(['a', 'a:inner', 'b', 'b:inner', 'c', 'c:inner'].map((part) => `${label}:${part}`));
    });

    it('refuses a joined transaction() that asks for a stricter isolation than the request’s, rather than run it weaker', async () => {
      const label = unique('serializable');
      const answer = await post(one, 'units/serializable', label, { label });
      expect(answer.status).toBe(500);
      expect(await rowsLabelled(label)).toEqual([]);
    });

    it('resolves a dataSource.transaction() whose callback caught a failed statement, rolled back as its COMMIT would be', async () => {
      const label = unique('caught-inside');
      await db.query(`INSERT INTO user_rows (label) VALUES ($1)`, [label]);
      const answer = await post(one, 'units/caught-inside', label, { label });
      expect([answer.status, answer.body]).toEqual([201, { caught: 'caught' }]);
      expect(await rowsLabelled(`${label}%`)).toEqual([label, `${label}:after`]);
    });

    it.each(['set-local', 'set-config'])('records and replays a handler whose transaction() moves to a tenant’s schema (search_path by %s)', async (how) => {
      const label = unique(`tenant-${how}`);
      const first = await post(one, `tenant-schema/${how}`, label, { label });
      expect([first.status, first.body]).toEqual([201, { label }]);
      const replay = await post(two, `tenant-schema/${how}`, label, { label });
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(first.text);
      expect(await db.query(`SELECT label FROM ${TENANT_SCHEMA}.user_rows WHERE label = $1`, [label])).toEqual([{ label }]);
      expect(await db.query(`SELECT type FROM idempotency_outbox WHERE payload->>'label' = $1`, [label])).toEqual([{ type: 'tenant' }]);
    });

    it('lets a handler catch a unique violation and carry on', async () => {
      const label = unique('caught');
      await db.query(`INSERT INTO user_rows (label) VALUES ($1)`, [label]);
      const first = await post(one, 'catch', label, { label });
      expect(first.status).toBe(201);
      expect(await rowsLabelled(`${label}%`)).toEqual([label, `${label}:after`]);
      const replay = await post(two, 'catch', label, { label });
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(first.text);
    });

    it('commits the flushes of a timer started inside a request once that request has committed, as without the module', async () => {
      lateErrors.length = 0;
      const label = unique('audit');
      expect((await post(one, 'audit/inheriting', label, { label })).status).toBe(201);
      for (const n of [1, 2, 3]) expect((await request(one.url).post('/user-code/audit/inheriting/plain').send({ label: `${label}:${n}` })).status).toBe(200);
      // The timer flushes every 20 ms.
      for (let i = 0; i < 50 && (await rowsLabelled(`${label}%`)).length < 4; i++) await sleep(20);
      expect(await rowsLabelled(`${label}%`)).toEqual([label, `${label}:1`, `${label}:2`, `${label}:3`]);
      expect(lateErrors).toEqual([]);
    });

    it('keeps the flushes of a timer started with IdempotencyTransactionHost.outside() out of the request that started it', async () => {
      lateErrors.length = 0;
      const label = unique('detached');
      const failing = post(one, 'audit/detached', label, { label, holdMs: 300, fail: true });
      await sleep(60);
      for (const n of [1, 2, 3]) expect((await request(one.url).post('/user-code/audit/detached/plain').send({ label: `${label}:${n}` })).status).toBe(200);
      expect((await failing).status).toBe(500);
      for (let i = 0; i < 50 && (await rowsLabelled(`${label}%`)).length < 4; i++) await sleep(20);
      expect(await rowsLabelled(`${label}%`)).toEqual([label, `${label}:1`, `${label}:2`, `${label}:3`]);
      expect(lateErrors).toEqual([]);
    });
  });

  describe('a duplicate, and a failure at COMMIT', () => {
    it('answers every duplicate with the winner’s status, whatever status a run would set', async () => {
      const label = unique('status');
      const answers = await Promise.all(Array.from({ length: 6 }, () => post(one, 'status-per-run', label, { label })));
      const replay = await post(two, 'status-per-run', label, { label });
      expect([...answers, replay].map((answer) => `${answer.status} ${answer.text}`)).toEqual(Array(7).fill(`${replay.status} ${replay.text}`));
    });

    it('answers a failure of the handler’s own at COMMIT (SQLSTATE 22012) as a failure, never as a key in flight', async () => {
      const label = unique('divide');
      for (let attempt = 0; attempt < 2; attempt++) {
        const answer = await post(one, 'divide-at-commit', label, { label });
        expect(answer.status).toBe(500);
        expect(answer.headers['retry-after']).toBeUndefined();
      }
      expect(await rowsLabelled(label)).toEqual([]);
    });
  });
});

/** The write methods `prototype` holds itself: what every response built on it writes with. */
function ownWrites(prototype: object): Record<string, unknown> {
  return Object.fromEntries(['writeHead', 'write', 'end', 'flushHeaders'].map((name) => [name, Object.getOwnPropertyDescriptor(prototype, name)?.value]));
}
