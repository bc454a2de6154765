import { Body, Controller, Module, Post } from '@nestjs/common';
import request from 'supertest';
import { setTimeout as sleep } from 'node:timers/promises';
import { type AttemptEvent, Idempotent, type IdempotencyModuleOptions } from '../src/idempotency/index.js';
import { IdempotencyPhasesModule, PhasedClaim, PhasedOperation, type Phases } from '../src/idempotency/phases/index.js';
import type { HttpAdapterName } from '../src/demo/http/http-setup.js';
import { HTTP_ADAPTERS, startApp, type RunningApp } from './support/http-app.js';
import { COMMIT_FAULTS, LEDGER_SCHEMA, Ledger, type LedgerDataSourceOptions, ledgerAppModules } from './support/ledger-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

/** Runs of the converted route's work, on either side of the deploy. */
const conversions = { runs: 0 };
type Converted = { label: string; holdMs?: number };

/** A route as the instances deployed before had it: one transaction. */
@Controller('converted')
class OneTransactionRoute {
  @Post()
  @Idempotent({ wait: 3000 })
  async add(@Body() body: Converted) {
    conversions.runs++;
    await sleep(body.holdMs ?? 0);
    return { label: body.label };
  }
}

@PhasedOperation('converted')
class ConvertedOperation implements PhasedOperation<Converted, { label: string }> {
  async run(input: Converted, phases: Phases) {
    // A call out, as slow as asked: the operation's claim is committed, and holds no lock meanwhile.
    await phases.external('hold', async () => (await sleep(input.holdMs ?? 0), { held: true }));
    return phases.local('add', async () => (conversions.runs++, { label: input.label }));
  }
}

/** The same route as the instances deployed after have it: a phased operation. */
@Controller('converted')
class PhasedRoute {
  @Post()
  @Idempotent({ phases: true, wait: 3000 })
  add(@Body() body: Converted, @PhasedClaim() claim: PhasedClaim) {
    return claim.run(ConvertedOperation, body);
  }
}

@Module({ imports: [IdempotencyPhasesModule], controllers: [PhasedRoute], providers: [ConvertedOperation] })
class PhasedRouteModule {}

/**
 * The claim of a key before the handler runs, where its races settle: a
 * duplicate that meets the owner's rows, an owner that fails at COMMIT, an
 * expired record taken over, a replay with no read in front of the claim.
 * Adapter-neutral but for the headers a losing request set: that runs on both.
 */
describe('the claim of a key', () => {
  let db: TestDatabase;
  let keySeq = 0;
  const newKey = () => `claims-${++keySeq}-${Date.now()}`;
  const apps: RunningApp[] = [];
  const start = async (options: Partial<IdempotencyModuleOptions>, adapter: HttpAdapterName = 'express', dataSource: LedgerDataSourceOptions = {}) => {
    const running = await startApp({ imports: ledgerAppModules(db.url, options, dataSource) }, { adapter });
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

  describe('a duplicate in flight', () => {
    it('answers a duplicate of an owner holding a unique row with the owner’s replay, never a 500', async () => {
      const { url, ledger } = await start({});
      const key = newKey();
      // The owner holds its uncommitted unique label while it sleeps; the duplicate waits on the key, never on the label.
      ledger.script.push({ delayMs: 300 });
      const owner = Promise.resolve(post(url, '/entries/unique', key, 'unique-label'));
      await sleep(50);
      const duplicate = await post(url, '/entries/unique', key, 'unique-label');
      const first = await owner;
      expect([first.status, duplicate.status]).toEqual([201, 201]);
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      expect(duplicate.headers['idempotent-replayed']).toBe('true');
      expect(duplicate.text).toBe(first.text);
      expect(await count(`SELECT count(*) AS n FROM ledger_labels WHERE label = $1`, ['unique-label'])).toBe(1);
    });

    it.each(HTTP_ADAPTERS)('sends none of the first answer’s own headers on a 422, and a replay only the recorded ones (%s)', async (adapter) => {
      const { url } = await start({ replayCacheSize: 0 }, adapter);
      const key = newKey();
      const first = await post(url, '/entries/located', key, 'located');
      expect(first.status).toBe(201);
      expect(first.headers['x-entry']).toBeDefined();
      // No cache: each of these finds the key recorded, and the handler that sets both headers never runs.
      const reused = await post(url, '/entries/located', key, 'other');
      expect(reused.status).toBe(422);
      expect(reused.headers.location).toBeUndefined();
      expect(reused.headers['x-entry']).toBeUndefined();
      const replay = await post(url, '/entries/located', key, 'located');
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.headers.location).toBe(first.headers.location);
      expect(replay.headers['x-entry']).toBeUndefined();
    });

    it('lets a waiting duplicate run and commit when the winner fails at COMMIT', async () => {
      const { url, ledger } = await start({});
      const key = newKey();
      // The winner holds the key through a slow COMMIT that then fails (a deferred trigger): nothing of it is kept.
      ledger.script.push({ commitDelayMs: 500, failAtCommit: true });
      const winner = Promise.resolve(post(url, '/entries', key, 'doomed'));
      await sleep(100);
      const duplicate = await post(url, '/entries', key, 'doomed');
      expect((await winner).status).toBe(500);
      expect(duplicate.status).toBe(201);
      expect(duplicate.headers['idempotent-replayed']).toBeUndefined();
      expect(await entriesLabelled('doomed')).toBe(1);
      expect(await count(`SELECT count(*) AS n FROM idempotency_records WHERE key = $1 AND status = 'completed'`, [key])).toBe(1);
    });
  });

  // Instances of one app whose transactions start at different levels, as during a deploy that changes the DataSource's:
  // the one at READ COMMITTED claims by the key's lock, the one at SERIALIZABLE by the key's record.
  it.each([
    ['READ COMMITTED', 'SERIALIZABLE'],
    ['SERIALIZABLE', 'READ COMMITTED'],
  ])('runs the handler once when the owner claims at %s and its duplicate at %s', async (ownerLevel, duplicateLevel) => {
    const at = (level: string) => start({ replayCacheSize: 0 }, 'express', { extra: { options: `-c default_transaction_isolation=${level.toLowerCase().replace(' ', '\\ ')}` } });
    const owner = await at(ownerLevel);
    const duplicate = await at(duplicateLevel);
    const key = newKey();
    const label = `levels-${ownerLevel}-${duplicateLevel}`.replace(/ /g, '-');
    owner.ledger.script.push({ delayMs: 400 });
    const first = Promise.resolve(post(owner.url, '/entries', key, label));
    await vi.waitFor(() => expect(owner.ledger.calls).toBe(1), { timeout: 10_000, interval: 5 });
    const second = await post(duplicate.url, '/entries', key, label);
    const answers = [await first, second];
    expect(answers.map((answer) => answer.status)).toEqual([201, 201]);
    expect(answers.map((answer) => answer.headers['idempotent-replayed'])).toEqual([undefined, 'true']);
    expect(second.text).toBe(answers[0].text);
    expect(owner.ledger.calls + duplicate.ledger.calls).toBe(1);
    expect(await entriesLabelled(label)).toBe(1);
  });

  // Started once the owner is in flight: the one-transaction owner's handler runs (its record comes with COMMIT); the phased owner's claim is committed.
  it.each([
    ['a one-transaction owner', 'before', (_key: string, runs: number) => expect(conversions.runs).toBe(runs + 1)],
    ['a phased owner', 'after', async (key: string) => expect(await count(`SELECT count(*) AS n FROM idempotency_records WHERE key = $1`, [key])).toBe(1)],
  ] as const)('runs a route once across a deploy that makes it phased: the duplicate of %s waits for its outcome, then replays it', async (_owner, ownerSide, started) => {
    const sides = {
      before: await startApp({ imports: ledgerAppModules(db.url, { replayCacheSize: 0 }), controllers: [OneTransactionRoute] }),
      after: await startApp({ imports: [...ledgerAppModules(db.url, { replayCacheSize: 0 }), PhasedRouteModule] }),
    };
    apps.push(sides.before, sides.after);
    const key = newKey();
    const runs = conversions.runs;
    const send = (app: RunningApp) => request(app.url).post('/converted').set('Idempotency-Key', key).set('X-Tenant', 'acme').send({ label: 'converted', holdMs: 400 });
    const first = Promise.resolve(send(sides[ownerSide]));
    await vi.waitFor(() => started(key, runs), { timeout: 10_000, interval: 5 });
    const duplicate = await send(sides[ownerSide === 'before' ? 'after' : 'before']);
    const owner = await first;
    expect([owner.status, duplicate.status]).toEqual([201, 201]);
    expect([owner.headers['idempotent-replayed'], duplicate.headers['idempotent-replayed']]).toEqual([undefined, 'true']);
    expect(duplicate.text).toBe(owner.text);
    expect(conversions.runs).toBe(runs + 1);
  });

  it('answers phased routes on a database whose default level is SERIALIZABLE as on one at READ COMMITTED: the leases’ own statements run at READ COMMITTED', async () => {
    const { url } = await start({ replayCacheSize: 0 }, 'express', { extra: { options: '-c default_transaction_isolation=serializable' } });
    const transfer = (key: string, label: string) => request(url).post('/entries/transfers').set('Idempotency-Key', key).set('X-Tenant', 'acme').send({ label });
    const distinct = await Promise.all(Array.from({ length: 30 }, (_, i) => transfer(newKey(), `phased-distinct-${i}`)));
    expect(distinct.map((answer) => answer.status)).toEqual(Array(30).fill(201));
    const key = newKey();
    const duplicates = await Promise.all(Array.from({ length: 20 }, () => transfer(key, 'phased-duplicate')));
    // The route waits 300 ms for an owner in flight: a duplicate replays, or gets 409 after that; never a failure of the module's own.
    expect(duplicates.filter((answer) => answer.status !== 201 && answer.status !== 409).map((answer) => `${answer.status} ${answer.text}`)).toEqual([]);
    expect(await entriesLabelled('debit:phased-duplicate')).toBe(1);
  });

  it('takes an expired record over, as a first execution', async () => {
    const events: AttemptEvent[] = [];
    const { url } = await start({ replayCacheSize: 0, onEvent: (event) => event.kind === 'attempt' && events.push(event) });
    const key = newKey();
    const first = await post(url, '/entries', key, 'expired');
    await db.query(`UPDATE idempotency_records SET expires_at = now() - interval '1 second' WHERE key = $1`, [key]);
    const again = await post(url, '/entries', key, 'expired');
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    expect(again.text).not.toBe(first.text);
    expect(events[1]).toMatchObject({ outcome: 'executed', tookOver: 'expired' });
    expect(await entriesLabelled('expired')).toBe(2);
    expect(await count(`SELECT count(*) AS n FROM idempotency_records WHERE key = $1 AND expires_at > now()`, [key])).toBe(1);
  });

  it('sends every replay the cache misses through the claim with readFirst: false', async () => {
    const events: AttemptEvent[] = [];
    const { url } = await start({ replayCacheSize: 0, readFirst: false, onEvent: (event) => event.kind === 'attempt' && events.push(event) });
    const key = newKey();
    const first = await post(url, '/entries', key, 'no-read-first');
    for (let i = 0; i < 6; i++) expect((await post(url, '/entries', key, 'no-read-first')).text).toBe(first.text);
    const replays = events.filter((event) => event.outcome === 'replayed');
    expect(replays).toHaveLength(6);
    // With the read-first path on, the later replays would be plain reads, with no claim (see the request-flow suite).
    expect(replays.every((event) => event.claimMs !== undefined)).toBe(true);
  });
});
