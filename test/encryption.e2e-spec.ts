import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import { Body, Controller, HttpException, Logger, Module, Post, Res } from '@nestjs/common';
import { Args, Field, GraphQLModule, Int, Mutation, ObjectType, Query, Resolver } from '@nestjs/graphql';
import { createHash, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import request from 'supertest';
import { type AttemptEvent, Idempotent, type IdempotencyModuleOptions } from '../src/idempotency/index.js';
import { AbandonedClaimsCompleter } from '../src/idempotency/phases/index.js';
import { idempotencyApolloPlugin, IdempotencyGraphqlModule } from '../src/idempotency/graphql/index.js';
import { canonicalRequest } from '../src/idempotency/fingerprint/request-fingerprint.js';
import { resolveEncryption } from '../src/idempotency/records/outcome-encryption.js';
import { OutcomeCodec } from '../src/idempotency/records/outcome-codec.js';
import { HTTP_ADAPTERS, startApp, type RunningApp } from './support/http-app.js';
import { Ledger, LEDGER_SCHEMA, ledgerAppModules, NotifyGate } from './support/ledger-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

/** Express and Fastify responses both set headers this way. */
interface HeaderWriter {
  header(name: string, value: string): unknown;
}

/** A route that sets every default replay header, so a test can see they are sealed too. */
@Controller('located')
class LocatedController {
  @Post()
  @Idempotent()
  create(@Body() body: { label: string }, @Res({ passthrough: true }) response: HeaderWriter) {
    response.header('Location', `/things/${body.label}`);
    response.header('ETag', `"etag-${body.label}"`);
    return { label: body.label, secret: `card-${body.label}` };
  }
}

@Module({ controllers: [LocatedController] })
class LocatedModule {}

const OLD = { id: 'k2024', key: randomBytes(32) };
const NEW = { id: 'k2025', key: randomBytes(32).toString('base64') };
const UNDECRYPTABLE = 'urn:nest-idempotency:problem:record-undecryptable';
const ENVELOPE = /^v2\.(k2024|k2025)\.fe?\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]+$/;
/** The fingerprint a request has without encryption: the SHA-256 of its canonical form, which anyone can compute. */
const plainFingerprintOf = (operation: string, body: object) => createHash('sha256').update(canonicalRequest(operation, { params: {}, query: {}, body })).digest('hex');

interface StoredRow {
  status: string;
  response_status: number;
  response_headers: Record<string, string> | null;
  response_body: string | null;
}

describe.each(HTTP_ADAPTERS)('encryption at rest (%s)', (adapter) => {
  let db: TestDatabase;
  const events: AttemptEvent[] = [];
  /** Seals with the old key only. */
  let sealing: RunningApp;
  /** Seals with the new key, opens both: after a rotation. */
  let rotated: RunningApp;
  /** Has the new key only. */
  let newOnly: RunningApp;
  /** No encryption: writes plaintext. */
  let plain: RunningApp;
  /** Encryption turned on over plaintext records, acceptPlaintext. */
  let migrating: RunningApp;
  /** Seals with the old key, and keeps a replay cache. */
  let cached: RunningApp;
  let seq = 0;
  const newKey = () => `crypt-${adapter}-${++seq}-${Date.now()}`;
  const unique = (label: string) => `${label}-${adapter}-${++seq}`;

  const post = (app: RunningApp, path: string, key: string, body: object) =>
    request(app.url).post(path).set('Idempotency-Key', key).set('X-Tenant', 'acme').send(body);
  const rowOf = async (key: string) =>
    (await db.query<StoredRow>(`SELECT status, response_status, response_headers, response_body FROM idempotency_records WHERE key = $1`, [key]))[0];
  const recordOf = async (key: string) =>
    (await db.query<{ scope: string; operation: string; key: string; fingerprint: string; status: string }>(`SELECT scope, operation, key, fingerprint, status FROM idempotency_records WHERE key = $1`, [key]))[0];
  const entriesLabelled = async (label: string) => Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM ledger_entries WHERE label = $1`, [label]))[0].n);
  const start = (options: Partial<IdempotencyModuleOptions>) =>
    startApp({ imports: [...ledgerAppModules(db.url, { replayCacheSize: 0, reaper: false, ...options }), LocatedModule] }, { adapter });

  /** A 500 record-undecryptable problem, with nothing run and nothing written. */
  const expectUndecryptable = async (response: request.Response, key: string, before: StoredRow) => {
    expect(response.status).toBe(500);
    expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(response.body).toMatchObject({ type: UNDECRYPTABLE, status: 500 });
    expect(response.headers['idempotent-replayed']).toBeUndefined();
    expect(await rowOf(key)).toEqual(before);
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(LEDGER_SCHEMA);
    sealing = await start({ encryption: { keys: [OLD] }, onEvent: (event) => event.kind === 'attempt' && events.push(event) });
    rotated = await start({ encryption: { keys: [NEW, OLD] } });
    newOnly = await start({ encryption: { keys: [NEW] } });
    plain = await start({});
    migrating = await start({ encryption: { keys: [OLD], acceptPlaintext: true } });
    cached = await start({ encryption: { keys: [OLD] }, replayCacheSize: 100 });
  });
  afterAll(async () => {
    for (const app of [sealing, rotated, newOnly, plain, migrating, cached]) await app?.close();
    await db?.drop();
  });

  it('refuses to start with a key that is not 32 bytes, naming the option', async () => {
    await expect(start({ encryption: { keys: [{ id: 'short', key: Buffer.alloc(16).toString('base64') }] } })).rejects.toThrow(
      /encryption\.keys\[0\] \("short"\): the key must be 32 bytes/,
    );
    Logger.overrideLogger(false); // the failed compile left the testing module's logger in place
  });

  describe('round trip', () => {
    it('replays a sealed outcome byte for byte, and the row holds no body or header value in plaintext', async () => {
      const key = newKey();
      const label = unique('located');
      const first = await post(sealing, '/located', key, { label });
      expect(first.status).toBe(201);
      expect(first.headers.location).toBe(`/things/${label}`);

      const row = await rowOf(key);
      expect(row.response_headers).toBeNull();
      expect(row.response_status).toBe(201);
      expect(row.response_body).toMatch(ENVELOPE);
      expect(row.response_body).toMatch(/^v2\.k2024\./);
      for (const value of [label, `card-${label}`, `/things/${label}`, `"etag-${label}"`, 'application/json', 'location']) expect(row.response_body).not.toContain(value);

      const replay = await post(sealing, '/located', key, { label });
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(first.text);
      for (const header of ['location', 'etag', 'content-type']) expect(replay.headers[header]).toBe(first.headers[header]);
    });

    it.each([
      ['a string body', '/entries/text', 201],
      ['no body', '/entries/empty', 204],
    ])('seals and replays %s', async (_, path, status) => {
      const key = newKey();
      const label = unique('shape');
      const first = await post(sealing, path, key, { label });
      expect(first.status).toBe(status);
      expect((await rowOf(key)).response_body).toMatch(ENVELOPE);
      const replay = await post(sealing, path, key, { label });
      expect(replay.status).toBe(status);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(first.text);
      expect(replay.headers['content-type']).toBe(first.headers['content-type']);
    });

    it.each([
      ['in plaintext', () => plain],
      ['sealed', () => sealing],
    ])('records a body with the request’s NUL character %s, and replays the same bytes from the table', async (_, app) => {
      const key = newKey();
      const label = unique('nul');
      // As bytes: a Buffer of exactly what was sent.
      const send = () => post(app(), '/entries/echo', key, { label, note: 'a\u0000b' }).responseType('blob');
      const first = await send();
      expect(first.status).toBe(201);
      expect((first.body as Buffer).toString()).toMatch(/^entry \d+: a\u0000b$/);
      const replay = await send();
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body).toEqual(first.body);
      expect(await entriesLabelled(label)).toBe(1);
    });

    it('seals a recorded storeErrors problem', async () => {
      const key = newKey();
      const label = unique('declined');
      sealing.app.get(Ledger).script.push({ fail: new HttpException({ code: 'card_declined', message: 'Card declined' }, 402) });
      const first = await post(sealing, '/entries', key, { label });
      expect(first.status).toBe(402);
      const row = await rowOf(key);
      expect(row.response_body).toMatch(ENVELOPE);
      expect(row.response_body).not.toContain('card_declined');
      const replay = await post(sealing, '/entries', key, { label });
      expect(replay.status).toBe(402);
      expect(replay.text).toBe(first.text);
      expect(replay.headers['content-type']).toBe(first.headers['content-type']);
    });

    it('seals the outcome of a phased operation, and of one the completer finished', async () => {
      const key = newKey();
      const label = unique('phased');
      const first = await post(sealing, '/entries/transfers', key, { label });
      expect(first.status).toBe(201);
      expect((await rowOf(key)).response_body).toMatch(ENVELOPE);
      expect((await post(sealing, '/entries/transfers', key, { label })).text).toBe(first.text);

      const abandoned = newKey();
      const gate = sealing.app.get(NotifyGate);
      gate.mode = 'fail';
      try {
        // The operation had started: 503 operation-unfinished, retry with the same key.
        expect((await post(sealing, '/entries/transfers', abandoned, { label: `${label}-resumed` })).status).toBe(503);
      } finally {
        gate.mode = 'pass';
      }
      await db.query(`UPDATE idempotency_records SET lease_expires_at = now() - interval '1 second' WHERE key = $1`, [abandoned]);
      expect(await sealing.app.get(AbandonedClaimsCompleter).completeAbandoned()).toMatchObject({ completed: 1 });
      const row = await rowOf(abandoned);
      expect(row).toMatchObject({ status: 'completed', response_headers: null });
      expect(row.response_body).toMatch(ENVELOPE);
      const replay = await post(sealing, '/entries/transfers', abandoned, { label: `${label}-resumed` });
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
    });
  });

  describe('rotation', () => {
    it('replays records of the old key once a new key is listed first, and seals new ones with the new key', async () => {
      const key = newKey();
      const label = unique('rotated');
      const first = await post(sealing, '/located', key, { label });
      const replay = await post(rotated, '/located', key, { label });
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(first.text);

      const fresh = newKey();
      expect((await post(rotated, '/located', fresh, { label })).status).toBe(201);
      expect((await rowOf(fresh)).response_body).toMatch(/^v2\.k2025\./);
    });

    it('answers 500, not a replay, on an instance that lacks the key a record names (unknown key id)', async () => {
      const key = newKey();
      const label = unique('unknown');
      expect((await post(sealing, '/located', key, { label })).status).toBe(201);
      const before = await rowOf(key);
      await expectUndecryptable(await post(newOnly, '/located', key, { label }), key, before);
      expect(await post(sealing, '/located', key, { label })).toMatchObject({ status: 201 });
    });
  });

  describe('request fingerprints', () => {
    const card = '4111111111111111';
    /** The review's search: hash each guess of the request as the module does without a key, until one is the stored fingerprint. */
    const guessedCard = (operation: string, fingerprint: string) => {
      for (let n = 0; n <= 9999; n++) {
        const guess = `411111111111${String(n).padStart(4, '0')}`;
        if (fingerprint.includes(plainFingerprintOf(operation, { label: guess }))) return guess;
      }
      return undefined;
    };

    it('stores one that hashing a guessed request without the key does not match, and that the HMAC under the key\'s derivation does', async () => {
      const unencrypted = newKey();
      expect((await post(plain, '/located', unencrypted, { label: card })).status).toBe(201);
      const leaked = await recordOf(unencrypted);
      expect(guessedCard(leaked.operation, leaked.fingerprint)).toBe(card);

      const key = newKey();
      expect((await post(sealing, '/located', key, { label: card })).status).toBe(201);
      const { scope, operation, fingerprint } = await recordOf(key);
      expect(fingerprint).toMatch(/^hmac\.k2024\.[0-9a-f]{64}$/);
      expect(guessedCard(operation, fingerprint)).toBeUndefined();
      const fingerprintKey = Buffer.from(hkdfSync('sha256', OLD.key, 'nest-idempotency/outcome-key/v1', 'request-fingerprint', 32));
      const canonical = canonicalRequest(operation, { params: {}, query: {}, body: { label: card } });
      expect(fingerprint).toBe(`hmac.k2024.${createHmac('sha256', fingerprintKey).update(JSON.stringify([scope, key])).update(canonical).digest('hex')}`);
    });

    it('replays a record fingerprinted under the old key once a new key is put first, answers another request 422, and fingerprints new records under the new key', async () => {
      const key = newKey();
      const label = unique('rotated-fingerprint');
      const first = await post(sealing, '/located', key, { label });
      expect((await recordOf(key)).fingerprint).toMatch(/^hmac\.k2024\./);
      const replay = await post(rotated, '/located', key, { label });
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(first.text);
      expect((await post(rotated, '/located', key, { label: `${label}-other` })).status).toBe(422);

      const fresh = newKey();
      expect((await post(rotated, '/located', fresh, { label })).status).toBe(201);
      expect((await recordOf(fresh)).fingerprint).toMatch(/^hmac\.k2025\.[0-9a-f]{64}$/);
    });

    it('lets the same request take over a phased operation whose lease lapsed across a rotation, and answers another request 422', async () => {
      const key = newKey();
      const label = unique('phased-rotated');
      const gate = sealing.app.get(NotifyGate);
      gate.mode = 'fail';
      try {
        expect((await post(sealing, '/entries/transfers', key, { label })).status).toBe(503);
      } finally {
        gate.mode = 'pass';
      }
      expect(await recordOf(key)).toMatchObject({ status: 'in_progress', fingerprint: expect.stringMatching(/^hmac\.k2024\./) });
      await db.query(`UPDATE idempotency_records SET lease_expires_at = now() - interval '1 second' WHERE key = $1`, [key]);
      expect((await post(rotated, '/entries/transfers', key, { label: `${label}-other` })).status).toBe(422);
      const resumed = await post(rotated, '/entries/transfers', key, { label });
      expect(resumed.status).toBe(201);
      expect(resumed.headers['idempotent-replayed']).toBeUndefined();
      expect(await recordOf(key)).toMatchObject({ status: 'completed', fingerprint: expect.stringMatching(/^hmac\.k2025\./) });
      expect((await post(rotated, '/entries/transfers', key, { label })).text).toBe(resumed.text);
    });

    it('checks a plain fingerprint written before encryption: the same request replays (acceptPlaintext), another answers 422', async () => {
      const key = newKey();
      const label = unique('plain-fingerprint');
      const first = await post(plain, '/entries', key, { label });
      expect((await recordOf(key)).fingerprint).toBe(plainFingerprintOf('POST /entries', { label }));
      const replay = await post(migrating, '/entries', key, { label });
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(first.text);
      expect((await post(migrating, '/entries', key, { label: `${label}-other` })).status).toBe(422);
      expect(await entriesLabelled(`${label}-other`)).toBe(0);
    });

    it('checks a plain fingerprint an earlier release sealed its outcome with, and opens nothing for another request\'s plain fingerprint written in its place', async () => {
      const key = newKey();
      const label = unique('earlier-release');
      const first = await post(sealing, '/entries', key, { label });
      // The record as a release before keyed fingerprints wrote it: the plain fingerprint, and the outcome sealed bound to it.
      const codec = new OutcomeCodec(resolveEncryption({ keys: [OLD] }));
      const [row] = await db.query<StoredRow & { scope: string; operation: string; fingerprint: string; expires_at: Date }>(`SELECT * FROM idempotency_records WHERE key = $1`, [key]);
      const id = { scope: row.scope, operation: row.operation, key };
      const plainFingerprint = plainFingerprintOf(row.operation, { label });
      const bindsExpiry = row.response_body!.split('.')[2] === 'fe';
      const { body } = codec.encode({ id, fingerprint: plainFingerprint, expiresAt: bindsExpiry ? row.expires_at : undefined }, codec.decode(id, row));
      await db.query(`UPDATE idempotency_records SET fingerprint = $2, response_body = $3 WHERE key = $1`, [key, plainFingerprint, body]);

      const replay = await post(sealing, '/entries', key, { label });
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(first.text);
      const other = { label: `${label}-other` };
      expect((await post(sealing, '/entries', key, other)).status).toBe(422);

      // Anyone can compute another request's plain fingerprint; written in, it is checked, and the outcome bound to the old one does not open.
      await db.query(`UPDATE idempotency_records SET fingerprint = $2 WHERE key = $1`, [key, plainFingerprintOf(row.operation, other)]);
      await expectUndecryptable(await post(sealing, '/entries', key, other), key, await rowOf(key));
      expect(await entriesLabelled(other.label)).toBe(0);
    });

    it('compares in the replay cache: with the record gone from the table, the same request spelled otherwise replays from memory, another answers 422', async () => {
      const key = newKey();
      const label = unique('cached-fingerprint');
      const send = (query: string, body: object) => request(cached.url).post(`/located?${query}`).set('Idempotency-Key', key).set('X-Tenant', 'acme').send(body);
      const first = await send('a=1&b=2', { label });
      expect(first.status).toBe(201);
      expect((await recordOf(key)).fingerprint).toMatch(/^hmac\.k2024\./);
      await db.query(`DELETE FROM idempotency_records WHERE key = $1`, [key]);
      const replay = await send('b=2&a=1', { label });
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(first.text);
      expect((await send('a=1&b=2', { label: `${label}-other` })).status).toBe(422);
      expect(await rowOf(key)).toBeUndefined();
    });

    it('compares on the read-first path, taken once replays are common: another request answers 422 from the read, the same replays', async () => {
      const key = newKey();
      const label = unique('read-first-fingerprint');
      expect((await post(sealing, '/entries', key, { label })).status).toBe(201);
      for (let i = 0; i < 8; i++) expect((await post(sealing, '/entries', key, { label })).headers['idempotent-replayed']).toBe('true');
      events.length = 0;
      expect((await post(sealing, '/entries', key, { label: `${label}-other` })).status).toBe(422);
      expect((await post(sealing, '/entries', key, { label })).headers['idempotent-replayed']).toBe('true');
      expect(events).toEqual([expect.objectContaining({ outcome: 'key_reused' }), expect.objectContaining({ outcome: 'replayed' })]);
      for (const event of events) expect(event.timeline?.claim).toBeUndefined(); // answered from the read, with no claim
    });
  });

  describe('records that do not decrypt', () => {
    it('answers 500 for a row copied to another key, keeps nothing it ran, and leaves both rows as they were', async () => {
      const original = newKey();
      const copy = newKey();
      const label = unique('copied');
      expect((await post(sealing, '/entries', original, { label })).status).toBe(201);
      await db.query(
        `INSERT INTO idempotency_records (scope, operation, key, fingerprint, status, response_status, response_headers, response_body, created_at, completed_at, expires_at)
         SELECT scope, operation, $2, fingerprint, status, response_status, response_headers, response_body, created_at, completed_at, expires_at
           FROM idempotency_records WHERE key = $1`,
        [original, copy],
      );
      const before = await rowOf(copy);
      // Claimed at commit (the default while keys are rarely held), the handler runs before the record is found; its writes roll back.
      await expectUndecryptable(await post(sealing, '/entries', copy, { label }), copy, before);
      expect(await entriesLabelled(label)).toBe(1);
      expect((await post(sealing, '/entries', original, { label })).headers['idempotent-replayed']).toBe('true');
    });

    it('answers 500 for tampered ciphertext', async () => {
      const key = newKey();
      const label = unique('tampered');
      expect((await post(sealing, '/entries', key, { label })).status).toBe(201);
      const { response_body: envelope } = await rowOf(key);
      const at = envelope!.length - 30;
      await db.query(`UPDATE idempotency_records SET response_body = $2 WHERE key = $1`, [key, envelope!.slice(0, at) + (envelope![at] === 'A' ? 'B' : 'A') + envelope!.slice(at + 1)]);
      await expectUndecryptable(await post(sealing, '/entries', key, { label }), key, await rowOf(key));
      expect(await entriesLabelled(label)).toBe(1);
    });

    it('answers 500 for a sealed record whose status column was changed', async () => {
      const key = newKey();
      const label = unique('status');
      expect((await post(sealing, '/entries', key, { label })).status).toBe(201);
      await db.query(`UPDATE idempotency_records SET response_status = 200 WHERE key = $1`, [key]);
      await expectUndecryptable(await post(sealing, '/entries', key, { label }), key, await rowOf(key));
    });

    it('answers 500, never the sealed answer, to another request whose fingerprint was written into the record', async () => {
      const key = newKey();
      const label = unique('fingerprint');
      const other = { label: `${label}-other` };
      expect((await post(sealing, '/entries', key, { label })).status).toBe(201);
      // The other request's fingerprint, as a record of its own holds it.
      const otherKey = newKey();
      expect((await post(sealing, '/entries', otherKey, other)).status).toBe(201);
      await db.query(`UPDATE idempotency_records SET fingerprint = (SELECT fingerprint FROM idempotency_records WHERE key = $2) WHERE key = $1`, [key, otherKey]);
      await expectUndecryptable(await post(sealing, '/entries', key, other), key, await rowOf(key));
      expect(await entriesLabelled(other.label)).toBe(1);
    });

    it('answers 500 for a record whose expiry was moved later', async () => {
      const key = newKey();
      const label = unique('extended');
      expect((await post(sealing, '/located', key, { label })).status).toBe(201);
      expect((await rowOf(key)).response_body).toMatch(/^v2\.k2024\.fe\./); // the claim dated the record before the outcome was sealed
      expect((await post(sealing, '/located', key, { label })).headers['idempotent-replayed']).toBe('true');
      await db.query(`UPDATE idempotency_records SET expires_at = expires_at + interval '30 days' WHERE key = $1`, [key]);
      await expectUndecryptable(await post(sealing, '/located', key, { label }), key, await rowOf(key));
    });

    it('answers 500 for a plaintext record while encryption is required, and leaves it in place', async () => {
      const key = newKey();
      const label = unique('plaintext');
      const first = await post(plain, '/entries', key, { label });
      expect(first.status).toBe(201);
      const before = await rowOf(key);
      expect(before.response_headers).toEqual({ 'content-type': 'application/json; charset=utf-8' });
      expect(before.response_body).toBe(first.text);
      await expectUndecryptable(await post(sealing, '/entries', key, { label }), key, before);
      expect(await entriesLabelled(label)).toBe(1);
    });

    it('replays a plaintext record with acceptPlaintext, and seals what it records itself', async () => {
      const key = newKey();
      const label = unique('migrating');
      const first = await post(plain, '/entries', key, { label });
      const replay = await post(migrating, '/entries', key, { label });
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(first.text);
      const fresh = newKey();
      expect((await post(migrating, '/entries', fresh, { label })).status).toBe(201);
      expect((await rowOf(fresh)).response_body).toMatch(/^v2\.k2024\./);
    });

    it('answers 500, never the envelope, on an instance without encryption', async () => {
      const key = newKey();
      const label = unique('turned-off');
      expect((await post(sealing, '/entries', key, { label })).status).toBe(201);
      await expectUndecryptable(await post(plain, '/entries', key, { label }), key, await rowOf(key));
    });

    it('answers 500 on the read-first path too, taken once replays are common', async () => {
      const good = newKey();
      const bad = newKey();
      const label = unique('read-first');
      expect((await post(sealing, '/entries', good, { label })).status).toBe(201);
      for (let i = 0; i < 8; i++) expect((await post(sealing, '/entries', good, { label })).headers['idempotent-replayed']).toBe('true');
      expect((await post(sealing, '/entries', bad, { label })).status).toBe(201);
      await db.query(`UPDATE idempotency_records SET response_status = 202 WHERE key = $1`, [bad]);
      events.length = 0;
      await expectUndecryptable(await post(sealing, '/entries', bad, { label }), bad, await rowOf(bad));
      expect(events).toEqual([expect.objectContaining({ outcome: 'undecryptable', undecryptable: 'authentication-failed', status: 500 })]);
      expect(events[0].timeline?.claim).toBeUndefined(); // answered from the read, with no claim
    });

    it('answers 500 on a phased route, whose flow reads the record apart', async () => {
      const key = newKey();
      const label = unique('phased-plain');
      expect((await post(plain, '/entries/transfers', key, { label })).status).toBe(201);
      const runs = sealing.app.get(NotifyGate).delivered.length;
      await expectUndecryptable(await post(sealing, '/entries/transfers', key, { label }), key, await rowOf(key));
      expect(sealing.app.get(NotifyGate).delivered.length).toBe(runs);
    });

    it('reports the reason in the attempt event', async () => {
      const key = newKey();
      const label = unique('event');
      expect((await post(plain, '/entries', key, { label })).status).toBe(201);
      events.length = 0;
      expect((await post(sealing, '/entries', key, { label })).status).toBe(500);
      expect(events).toEqual([expect.objectContaining({ outcome: 'undecryptable', undecryptable: 'plaintext-refused', status: 500, keyHash: expect.any(String) })]);
    });

    it('frees the key once such a record expires: the next request runs and seals its own outcome', async () => {
      const key = newKey();
      const label = unique('expired');
      expect((await post(plain, '/entries', key, { label })).status).toBe(201);
      expect((await post(sealing, '/entries', key, { label })).status).toBe(500);
      await db.query(`UPDATE idempotency_records SET expires_at = now() - interval '1 second' WHERE key = $1`, [key]);
      const retry = await post(sealing, '/entries', key, { label });
      expect(retry.status).toBe(201);
      expect(retry.headers['idempotent-replayed']).toBeUndefined();
      expect(await entriesLabelled(label)).toBe(2);
      expect((await rowOf(key)).response_body).toMatch(/^v2\.k2024\./);
    });
  });
});

@ObjectType()
class Voucher {
  @Field()
  label: string;

  @Field()
  code: string;
}

@Resolver(() => Voucher)
class VouchersResolver {
  runs = 0;

  @Mutation(() => Voucher)
  @Idempotent()
  issueVoucher(@Args('label') label: string, @Args('idempotencyKey', { type: () => String, nullable: true }) _key?: string): Voucher {
    this.runs++;
    return Object.assign(new Voucher(), { label, code: `code-${label}` });
  }

  @Query(() => Int)
  issued() {
    return this.runs;
  }
}

@Module({ providers: [VouchersResolver] })
class VouchersModule {}

/** The GraphQL flow records through the same codec (Apollo, in process; graphql.e2e-spec.ts runs Mercurius through the demo). */
describe('encryption at rest of a GraphQL mutation (Apollo)', () => {
  let db: TestDatabase;
  let running: RunningApp;
  const issue = async (label: string, key: string) => {
    const response = await fetch(`${running.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-tenant': 'acme' },
      body: JSON.stringify({ query: `mutation ($label: String!, $key: String) { issueVoucher(label: $label, idempotencyKey: $key) { label code } }`, variables: { label, key } }),
    });
    return (await response.json()) as { data: { issueVoucher: Voucher } | null; errors?: Array<{ extensions: Record<string, unknown> }>; extensions?: any };
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(LEDGER_SCHEMA);
    running = await startApp({
      imports: [
        ...ledgerAppModules(db.url, { replayCacheSize: 0, reaper: false, encryption: { keys: [OLD] } }),
        GraphQLModule.forRoot<ApolloDriverConfig>({ driver: ApolloDriver, autoSchemaFile: true, plugins: [idempotencyApolloPlugin()], includeStacktraceInErrorResponses: false }),
        IdempotencyGraphqlModule,
        VouchersModule,
      ],
    });
  });
  afterAll(async () => {
    await running?.close();
    await db?.drop();
  });

  it('seals the field value, replays it, and answers a record that does not decrypt with its problem', async () => {
    const key = `voucher-${Date.now()}`;
    const first = await issue('gift', key);
    expect(first.data).toEqual({ issueVoucher: { label: 'gift', code: 'code-gift' } });
    const [row] = await db.query<StoredRow>(`SELECT status, response_status, response_headers, response_body FROM idempotency_records WHERE key = $1`, [key]);
    expect(row.response_headers).toBeNull();
    expect(row.response_body).toMatch(ENVELOPE);
    expect(row.response_body).not.toContain('code-gift');
    const [{ fingerprint }] = await db.query<{ fingerprint: string }>(`SELECT fingerprint FROM idempotency_records WHERE key = $1`, [key]);
    expect(fingerprint).toMatch(/^hmac\.k2024\.[0-9a-f]{64}$/);

    const replay = await issue('gift', key);
    expect(replay.data).toEqual(first.data);
    expect(replay.extensions.idempotency.replayed).toBe(true);
    const reused = await issue('another gift', key);
    expect(reused.errors).toEqual([expect.objectContaining({ extensions: expect.objectContaining({ status: 422 }) })]);

    await db.query(`UPDATE idempotency_records SET response_status = 299 WHERE key = $1`, [key]);
    const unreadable = await issue('gift', key);
    expect(unreadable.data).toBeNull();
    expect(unreadable.errors).toEqual([expect.objectContaining({ extensions: expect.objectContaining({ type: UNDECRYPTABLE, status: 500, code: 'IDEMPOTENCY_RECORD_UNDECRYPTABLE' }) })]);
    expect(running.app.get(VouchersResolver).runs).toBe(1);
  });
});
