import request from 'supertest';
import { setTimeout as sleep } from 'node:timers/promises';
import { IdempotencyReaper } from '../src/idempotency/index.js';
import { AbandonedClaimsCompleter } from '../src/idempotency/phases/index.js';
import { IdempotencyMetricsModule } from '../src/idempotency/metrics/index.js';
import { MetricsController } from '../src/demo/metrics/metrics.controller.js';
import { HTTP_ADAPTERS, startApp, type RunningApp } from './support/http-app.js';
import { COMMIT_FAULTS, LEDGER_SCHEMA, Ledger, ledgerAppModules, NotifyGate } from './support/ledger-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

/** The value of one sample in Prometheus text format, 0 when absent. */
function sample(metrics: string, name: string, labels: Record<string, string> = {}): number {
  const wanted = Object.entries(labels).map(([label, value]) => `${label}="${value}"`);
  for (const line of metrics.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (wanted.every((pair) => line.includes(pair))) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return 0;
}

describe.each(HTTP_ADAPTERS)('/metrics under a scripted scenario (%s)', (adapter) => {
  let db: TestDatabase;
  let running: RunningApp;
  const post = (path: string, key: string | undefined, label: string) => {
    const req = request(running.url).post(path).set('X-Tenant', 'acme');
    if (key) req.set('Idempotency-Key', key);
    return Promise.resolve(req.send({ label }));
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(LEDGER_SCHEMA);
    running = await startApp({
      // No replay cache: the scenario ages records in the database, behind the cache's back.
      imports: [...ledgerAppModules(db.url, { lease: 60_000, reaper: false, replayCacheSize: 0 }), IdempotencyMetricsModule.forRoot()],
      controllers: [MetricsController],
    }, { adapter });
    await db.query(COMMIT_FAULTS);
  });
  afterAll(async () => {
    await running?.close();
    await db?.drop();
  });

  it('moves every counter, labelled by operation and outcome only', async () => {
    const ledger = running.app.get(Ledger);
    const gate = running.app.get(NotifyGate);
    await post('/entries', 'k-first', 'a'); // executed
    await post('/entries', 'k-first', 'a'); // replayed at once
    await post('/entries', 'k-first', 'b'); // fingerprint mismatch
    await post('/entries', undefined, 'a'); // key missing
    await post('/entries', 'two words', 'a'); // key malformed

    ledger.script.push({ delayMs: 300 });
    const owner = post('/entries', 'k-waited', 'w');
    await sleep(80);
    await post('/entries', 'k-waited', 'w'); // waits, then replays
    await owner;

    ledger.script.push({ delayMs: 800 });
    const slow = post('/entries/a1/transfers', 'k-conflict', 'c');
    await sleep(100);
    await post('/entries/a1/transfers', 'k-conflict', 'c'); // 409
    await slow;

    await db.query(`UPDATE idempotency_records SET expires_at = now() - interval '1 second' WHERE key = 'k-first'`);
    await post('/entries', 'k-first', 'a'); // takes the expired record over

    running.app.get(Ledger).script.push({ failAtCommit: true });
    expect((await post('/entries', 'k-commit', 'fail-at-commit')).status).toBe(500); // commit failure

    gate.mode = 'fail';
    await post('/entries/transfers', 'k-lease', 'l');
    await post('/entries/transfers', 'k-lease-2', 'l2');
    gate.mode = 'pass';
    await post('/entries/transfers', 'k-lease', 'l'); // takes its own lapsed lease over
    await running.app.get(AbandonedClaimsCompleter).completeAbandoned(); // finishes k-lease-2

    await db.query(`UPDATE idempotency_records SET expires_at = now() - interval '1 second' WHERE key = 'k-waited'`);
    await running.app.get(IdempotencyReaper).reap(new Date());

    const metrics = (await request(running.url).get('/metrics')).text;
    const create = { operation: 'POST /entries' };
    const phased = { operation: 'POST /entries/transfers' };
    expect(sample(metrics, 'idempotency_attempts_total', { ...create, outcome: 'executed' })).toBe(3);
    expect(sample(metrics, 'idempotency_executions_total', create)).toBe(3);
    expect(sample(metrics, 'idempotency_replays_total', { ...create, path: 'immediate' })).toBe(1);
    expect(sample(metrics, 'idempotency_replays_total', { ...create, path: 'after_wait' })).toBe(1);
    expect(sample(metrics, 'idempotency_in_progress_collisions_total', { ...create, result: 'replayed' })).toBe(1);
    expect(sample(metrics, 'idempotency_in_progress_collisions_total', { operation: 'POST /entries/:account/transfers', result: 'conflict' })).toBe(1);
    expect(sample(metrics, 'idempotency_fingerprint_mismatches_total', create)).toBe(1);
    expect(sample(metrics, 'idempotency_key_rejections_total', { ...create, reason: 'missing' })).toBe(1);
    expect(sample(metrics, 'idempotency_key_rejections_total', { ...create, reason: 'malformed' })).toBe(1);
    expect(sample(metrics, 'idempotency_takeovers_total', { ...create, kind: 'expired' })).toBe(1);
    expect(sample(metrics, 'idempotency_takeovers_total', { ...phased, kind: 'lease' })).toBe(1);
    expect(sample(metrics, 'idempotency_commit_failures_total', create)).toBe(1);
    expect(sample(metrics, 'idempotency_attempts_total', { ...create, outcome: 'rolled_back' })).toBe(1);
    expect(sample(metrics, 'idempotency_records_reaped_total')).toBe(1);
    expect(sample(metrics, 'idempotency_leases_expired_total', { ...phased, result: 'completed' })).toBe(1);
    expect(sample(metrics, 'idempotency_claim_wait_seconds_count', create)).toBeGreaterThanOrEqual(4);
    expect(sample(metrics, 'idempotency_handler_seconds_count', create)).toBe(4);
    for (const secret of ['k-first', 'k-waited', 'acme', 'tenant:']) expect(metrics).not.toContain(secret);
  });
});
