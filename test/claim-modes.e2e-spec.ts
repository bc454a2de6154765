import request from 'supertest';
import { setTimeout as sleep } from 'node:timers/promises';
import { type AttemptEvent, IdempotencyConfigurationError, type IdempotencyModuleOptions } from '../src/idempotency/index.js';
import type { HttpAdapterName } from '../src/demo/http/http-setup.js';
import { CLAIM_MODES, HTTP_ADAPTERS, startApp, type RunningApp } from './support/http-app.js';
import { COMMIT_FAULTS, LEDGER_SCHEMA, Ledger, ledgerAppModules } from './support/ledger-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

/**
 * The two claim modes where they differ in what they do, and agree in what a
 * client sees: the races a claim at commit settles only at COMMIT, the cost
 * of a retry that finds no shortcut, and the modes it refuses.
 * Adapter-neutral but for the headers a losing handler set: that runs on both.
 */
describe('claim modes', () => {
  let db: TestDatabase;
  let keySeq = 0;
  const newKey = () => `modes-${++keySeq}-${Date.now()}`;
  const apps: RunningApp[] = [];
  const start = async (options: Partial<IdempotencyModuleOptions>, adapter: HttpAdapterName = 'express') => {
    const running = await startApp({ imports: ledgerAppModules(db.url, options) }, { adapter });
    apps.push(running);
    await db.query(COMMIT_FAULTS);
    return { url: running.url, ledger: running.app.get(Ledger) };
  };
  const post = (url: string, path: string, key: string, label: string) => request(url).post(path).set('Idempotency-Key', key).set('X-Tenant', 'acme').send({ label });
  const count = async (sql: string, params: unknown[]) => Number((await db.query<{ n: string }>(sql, params))[0].n);
  const entriesLabelled = (label: string) => count(`SELECT count(*) AS n FROM ledger_entries WHERE label = $1`, [label]);

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(LEDGER_SCHEMA);
  });
  afterEach(async () => {
    for (const app of apps.splice(0)) await app.close();
  });
  afterAll(async () => {
    await db?.drop();
  });

  describe.each(CLAIM_MODES)('claimed %s', (claim) => {
    it('answers a duplicate that fails on the winner’s unique row with the winner’s replay, never a 500', async () => {
      const { url, ledger } = await start({ claim });
      const key = newKey();
      // The owner holds its uncommitted unique label while it sleeps; a duplicate at commit inserts the same label, waits, then violates it.
      ledger.script.push({ delayMs: 300 });
      const owner = Promise.resolve(post(url, '/entries/unique', key, `unique-${claim}`));
      await sleep(50);
      const duplicate = await post(url, '/entries/unique', key, `unique-${claim}`);
      const first = await owner;
      expect([first.status, duplicate.status]).toEqual([201, 201]);
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      expect(duplicate.headers['idempotent-replayed']).toBe('true');
      expect(duplicate.text).toBe(first.text);
      expect(await count(`SELECT count(*) AS n FROM ledger_labels WHERE label = $1`, [`unique-${claim}`])).toBe(1);
    });

    it.each(HTTP_ADAPTERS)('sends none of the headers a losing handler set: a 422 and a replay carry only their own (%s)', async (adapter) => {
      const { url } = await start({ claim, replayCacheSize: 0 }, adapter);
      const key = newKey();
      const first = await post(url, '/entries/located', key, `located-${claim}`);
      expect(first.status).toBe(201);
      expect(first.headers['x-entry']).toBeDefined();
      // No cache: claimed at commit, each of these runs the handler, which sets both headers, then finds the key held.
      const reused = await post(url, '/entries/located', key, `other-${claim}`);
      expect(reused.status).toBe(422);
      expect(reused.headers.location).toBeUndefined();
      expect(reused.headers['x-entry']).toBeUndefined();
      const replay = await post(url, '/entries/located', key, `located-${claim}`);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.headers.location).toBe(first.headers.location);
      expect(replay.headers['x-entry']).toBeUndefined();
    });

    it('lets a waiting duplicate run and commit when the winner fails at COMMIT', async () => {
      const { url, ledger } = await start({ claim });
      const key = newKey();
      // The winner holds the key through a slow COMMIT that then fails (a deferred trigger): nothing of it is kept.
      ledger.script.push({ commitDelayMs: 500, failAtCommit: true });
      const winner = Promise.resolve(post(url, '/entries', key, `doomed-${claim}`));
      await sleep(100);
      const duplicate = await post(url, '/entries', key, `doomed-${claim}`);
      expect((await winner).status).toBe(500);
      expect(duplicate.status).toBe(201);
      expect(duplicate.headers['idempotent-replayed']).toBeUndefined();
      expect(await entriesLabelled(`doomed-${claim}`)).toBe(1);
      expect(await count(`SELECT count(*) AS n FROM idempotency_records WHERE key = $1 AND status = 'completed'`, [key])).toBe(1);
    });
  });

  it('runs a sequential retry that finds no shortcut at commit, rolls it back, and replays the original bytes', async () => {
    const events: AttemptEvent[] = [];
    const { url, ledger } = await start({ claim: 'at-commit', replayCacheSize: 0, onEvent: (event) => event.kind === 'attempt' && events.push(event) });
    const key = newKey();
    const first = await post(url, '/entries', key, 'retried-at-commit');
    const calls = ledger.calls;
    const retry = await post(url, '/entries', key, 'retried-at-commit');
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.text).toBe(first.text);
    // The handler ran again (no cache, no read first yet), and all it wrote rolled back.
    expect(ledger.calls).toBe(calls + 1);
    expect(await entriesLabelled('retried-at-commit')).toBe(1);
    expect(events.map(({ outcome, claimed }) => ({ outcome, claimed }))).toEqual([
      { outcome: 'executed', claimed: 'at-commit' },
      { outcome: 'replayed', claimed: 'at-commit' },
    ]);
    expect((await post(url, '/entries', key, 'other-body')).status).toBe(422);
  });

  it.each(CLAIM_MODES)('takes an expired record over, as a first execution (claimed %s)', async (claim) => {
    const events: AttemptEvent[] = [];
    const { url } = await start({ claim, replayCacheSize: 0, onEvent: (event) => event.kind === 'attempt' && events.push(event) });
    const key = newKey();
    const first = await post(url, '/entries', key, `expired-${claim}`);
    await db.query(`UPDATE idempotency_records SET expires_at = now() - interval '1 second' WHERE key = $1`, [key]);
    const again = await post(url, '/entries', key, `expired-${claim}`);
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    expect(again.text).not.toBe(first.text);
    expect(events[1]).toMatchObject({ outcome: 'executed', tookOver: 'expired', claimed: claim });
    expect(await entriesLabelled(`expired-${claim}`)).toBe(2);
    expect(await count(`SELECT count(*) AS n FROM idempotency_records WHERE key = $1 AND expires_at > now()`, [key])).toBe(1);
  });

  it('replays, rolled back, where an instance claiming at commit recorded the key while one claiming first ran (a rolling change of `claim`)', async () => {
    // The one claiming first holds the key's lock, which a claim at commit never takes: its record finds the key held when it is inserted.
    const first = await start({ claim: 'first', replayCacheSize: 0 });
    const atCommit = await start({ claim: 'at-commit', replayCacheSize: 0 });
    const key = newKey();
    first.ledger.script.push({ delayMs: 400 });
    const slow = Promise.resolve(post(first.url, '/entries', key, 'mixed-modes'));
    await sleep(100);
    const fast = await post(atCommit.url, '/entries', key, 'mixed-modes');
    const late = await slow;
    expect([fast.status, late.status]).toEqual([201, 201]);
    expect(fast.headers['idempotent-replayed']).toBeUndefined();
    expect(late.headers['idempotent-replayed']).toBe('true');
    expect(late.text).toBe(fast.text);
    expect(await entriesLabelled('mixed-modes')).toBe(1);
  });

  it('sends every replay the cache misses through the claim with readFirst: false', async () => {
    const events: AttemptEvent[] = [];
    const { url } = await start({ claim: 'first', replayCacheSize: 0, readFirst: false, onEvent: (event) => event.kind === 'attempt' && events.push(event) });
    const key = newKey();
    const first = await post(url, '/entries', key, 'no-read-first');
    for (let i = 0; i < 6; i++) expect((await post(url, '/entries', key, 'no-read-first')).text).toBe(first.text);
    const replays = events.filter((event) => event.outcome === 'replayed');
    expect(replays).toHaveLength(6);
    // With the read-first path on, the later replays would be plain reads, with no claim (see the request-flow suite).
    expect(replays.every((event) => event.claimMs !== undefined)).toBe(true);
  });

  it('claims first by default', async () => {
    const events: AttemptEvent[] = [];
    const { url } = await start({ replayCacheSize: 0, onEvent: (event) => event.kind === 'attempt' && events.push(event) });
    expect((await post(url, '/entries/optional', newKey(), 'default')).status).toBe(201);
    expect(events.at(-1)).toMatchObject({ outcome: 'executed', claimed: 'first' });
  });

  it.each([
    ['the module', { claim: 'adaptive' }, 'IdempotencyModule'],
    ['a typo', { claim: 'frist' }, 'IdempotencyModule'],
  ])('refuses to start on a claim mode it does not have: %s', async (_case, options, where) => {
    const booted = start(options as unknown as IdempotencyModuleOptions);
    await expect(booted).rejects.toThrow(IdempotencyConfigurationError);
    await expect(booted).rejects.toThrow(`${where}: claim must be 'first' (the default) or 'at-commit'`);
  });
});
