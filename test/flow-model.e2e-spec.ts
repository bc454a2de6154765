import fc from 'fast-check';
import { HTTP_ADAPTERS, startApp, type RunningApp } from './support/http-app.js';
import { flowCommands, keyOf, labelOf, type FlowModel, type FlowReal } from './support/flow-model.js';
import { LEDGER_SCHEMA, Ledger, ledgerAppModules } from './support/ledger-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

/**
 * Model-based test of the request flow: random sequences of sends, retries,
 * mismatched bodies, scripted failures, recorded errors, concurrent
 * duplicates and bad keys, each answer checked against a reference model of
 * the HTTP contract, then the database checked against the model.
 */
describe.each(HTTP_ADAPTERS)('request flow against a reference model (%s)', (adapter) => {
  let db: TestDatabase;
  let running: RunningApp;
  let ledger: Ledger;
  let runSeq = 0;

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(LEDGER_SCHEMA);
    // No reaper timer: nothing may change the records behind the model's back.
    // A wait inside the range of scripted owner delays, so duplicates both replay and time out (409).
    running = await startApp({ imports: ledgerAppModules(db.url, { reaper: false, wait: 100 }) }, { adapter });
    ledger = running.app.get(Ledger);
  });
  afterAll(async () => {
    await running?.close();
    await db?.drop();
  });

  /** What the database must hold once a run is over: the model's records, and one ledger row per recorded success. */
  async function expectDatabaseMatches(model: FlowModel, real: FlowReal, calls: number): Promise<void> {
    const entries = [...model.entries.values()];
    const records = await db.query(
      `SELECT scope, key, status, response_status, response_body FROM idempotency_records WHERE position($1 in key) > 0 ORDER BY scope, key`,
      [real.ns],
    );
    const expected = entries
      .map((e) => ({ scope: `tenant:${e.tenant}`, key: keyOf(real.ns, e.key), status: 'completed', response_status: e.status, response_body: e.text }))
      .sort((x, y) => (x.scope + x.key < y.scope + y.key ? -1 : 1));
    expect(records).toEqual(expected);

    const rows = await db.query<{ id: string; label: string }>(`SELECT id, label FROM ledger_entries WHERE starts_with(label, $1) ORDER BY id`, [`${real.ns}:`]);
    const successes = entries.filter((e) => e.status === 201).map((e) => ({ id: JSON.parse(e.text).entry, label: labelOf(real.ns, e.body) }));
    expect(rows.map((row) => ({ id: Number(row.id), label: row.label }))).toEqual(successes.sort((x, y) => x.id - y.id));
    // Every call the handler got is one the model allowed: fresh outcomes and released failures, no more.
    expect(calls).toBe(model.executions);
  }

  it('answers every request as the model predicts, and stores exactly what the model holds', async () => {
    await fc.assert(
      fc.asyncProperty(fc.commands(flowCommands, { maxCommands: 12, size: 'max' }), async (commands) => {
        const real: FlowReal = { url: running.url, ledger, db, ns: `fm${Date.now().toString(36)}r${++runSeq}` };
        const model: FlowModel = { entries: new Map(), executions: 0 };
        const callsBefore = ledger.calls;
        await fc.asyncModelRun(() => ({ model, real }), commands);
        await expectDatabaseMatches(model, real, ledger.calls - callsBefore);
      }),
      { numRuns: 20 },
    );
  }, 60_000);
});
