import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { Registry } from 'prom-client';
import request from 'supertest';
import { IdempotencyProblemType } from '../src/idempotency/index.js';
import { EXIT, runCli } from '../src/idempotency/cli/cli.js';
import { adminAppModules } from './support/admin-app.js';
import { startApp, type RunningApp } from './support/http-app.js';
import { LEDGER_SCHEMA, NotifyGate } from './support/ledger-app.js';
import { RecordingPublisher } from './support/outbox-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

/** The compiled bin, as `npx nest-idempotency` runs it (`npm test` builds first). */
const BIN = resolve('dist/src/idempotency/cli/main.js');
const KEY = randomBytes(32).toString('base64');

/** One CLI run in process: its exit code, and what it wrote where. */
async function cli(env: Record<string, string | undefined>, ...args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(args, env, { out: (text) => out.push(text), err: (text) => err.push(text) });
  return { code, out: out.join('\n'), err: err.join('\n'), json: () => JSON.parse(out.join('\n')) };
}

/** The compiled bin as a shell runs it, with `extra` over the environment. */
function bin(extra: Record<string, string | undefined>, ...args: string[]) {
  return promisify(execFile)(process.execPath, [BIN, ...args], { env: { ...process.env, ...extra } }).then(
    ({ stdout }) => ({ code: 0, stdout }),
    (error: { code: number; stdout: string }) => ({ code: error.code, stdout: error.stdout }),
  );
}

/** What a terminal would act on: any C0 but the newlines the CLI lays out with, DEL, C1, U+2028 and U+2029. */
const ACTIVE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029]/;

async function until(condition: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(25);
  }
}

describe('the nest-idempotency CLI', () => {
  let db: TestDatabase;
  let app: RunningApp;
  let publisher: RecordingPublisher;
  let env: Record<string, string>;
  const entry = (key: string, label: string, tenant = 'acme') => request(app.url).post('/entries').set('Idempotency-Key', key).set('X-Tenant', tenant).send({ label });
  const transfer = (key: string) => Promise.resolve(request(app.url).post('/entries/transfers').set('Idempotency-Key', key).set('X-Tenant', 'acme').send({ label: key }));
  /** A transfer of acme's that debited, then failed: an abandoned phased operation once its lease lapsed. */
  const abandon = async (key: string) => {
    const gate = app.app.get(NotifyGate);
    gate.mode = 'fail';
    expect((await transfer(key)).status).toBe(503);
    gate.mode = 'pass';
  };
  const TRANSFERS = ['--tenant', 'acme', '--operation', 'POST /entries/transfers'];

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(LEDGER_SCHEMA);
    publisher = new RecordingPublisher();
    // Sealed at rest: the CLI opens answers, and seals a failure, only with the app's keys.
    app = await startApp({ imports: adminAppModules(db.url, publisher, new Registry(), { encryption: { keys: [{ id: 'cli-test', key: KEY }] } }) });
    env = { DATABASE_URL: db.url, IDEMPOTENCY_ENCRYPTION_KEYS: `cli-test:${KEY}` };
  });
  afterAll(async () => {
    app?.app.get(NotifyGate).release();
    await app?.close();
    await db?.drop();
  });

  it('inspects a key as the compiled bin, with exit codes a script can test and JSON it can read', async () => {
    await entry('cli-shared', 'acme').expect(201);
    await entry('cli-shared', 'globex', 'globex').expect(201);
    const run = (...args: string[]) => bin(env, ...args);
    const found = await run('--json', 'inspect', 'cli-shared');
    expect(found.code).toBe(EXIT.done);
    expect(JSON.parse(found.stdout).items.map((record: { scope: string }) => record.scope)).toEqual(['tenant:globex', 'tenant:acme']);
    expect((await run('inspect', 'no-such-key')).code).toBe(EXIT.nothing);
    expect((await run('inspect', '--limit', 'x')).code).toBe(EXIT.usage);
  });

  it('shows one record with its answer opened with the app\'s keys, and says why not without them', async () => {
    const sent = await entry('cli-detail', 'sealed').expect(201);
    const opened = await cli(env, '--json', 'inspect', 'cli-detail', '--tenant', 'acme', '--operation', 'POST /entries');
    expect(opened.code).toBe(EXIT.done);
    expect(opened.json()).toMatchObject({ key: 'cli-detail', status: 'completed', answer: { status: 201, body: sent.text, sealed: true } });
    const human = await cli(env, 'inspect', 'cli-detail', '--tenant', 'acme', '--operation', 'POST /entries');
    expect(human.out).toContain(`body         ${sent.text}`);
    const keyless = await cli({ DATABASE_URL: db.url }, 'inspect', 'cli-detail', '--scope', 'tenant:acme', '--operation', 'POST /entries');
    expect(keyless.out).toContain('does not open here (encryption-off)');
  });

  it('lists unfinished operations, marks one failed with a sealed failure the app replays, and releases it only with --force, saying first what a retry does', async () => {
    const gate = app.app.get(NotifyGate);
    gate.mode = 'fail';
    expect((await transfer('cli-abandoned')).status).toBe(503);
    gate.mode = 'pass';
    const listed = await cli(env, '--json', 'unfinished', '--tenant', 'acme');
    expect(listed.json().items).toContainEqual(expect.objectContaining({ key: 'cli-abandoned', state: 'abandoned', resumes: 'ledger-transfer', recoveryPoint: 'debit' }));
    expect(listed.json().items[0]).not.toHaveProperty('registeredHere');

    const failed = await cli(env, 'fail', 'cli-abandoned', '--tenant', 'acme', '--operation', 'POST /entries/transfers', '--reason', 'refunded by hand', '--as', 'on-call');
    expect(failed.code).toBe(EXIT.done);
    expect(failed.err).toContain('admin: "on-call" marked failed "POST /entries/transfers" key#');
    const retry = await transfer('cli-abandoned');
    expect([retry.status, retry.body.type]).toEqual([500, IdempotencyProblemType.OperationFailed]);

    const shown = await cli(env, 'inspect', 'cli-abandoned', '--tenant', 'acme', '--operation', 'POST /entries/transfers');
    expect(shown.out).toMatch(/on release +needs --force\. Its phased operation ledger-transfer started: finished phases debit/);
    const release = ['release', 'cli-abandoned', '--tenant', 'acme', '--operation', 'POST /entries/transfers', '--reason', 'may try again'];
    const refused = await cli(env, ...release);
    expect(refused.code).toBe(EXIT.refused);
    expect(refused.err).toMatch(/Operation started: .*finished phases debit.*each effect happens a second time.*--force/s);
    expect(refused.err).not.toMatch(/fail[^.]*then release/i);
    const forced = await cli(env, ...release, '--force');
    expect(forced.code).toBe(EXIT.done);
    expect(forced.out).toBe('Released (forced): POST /entries/transfers key cli-abandoned in tenant:acme.');
    const [warning, audit] = forced.err.split('\n');
    expect(warning).toMatch(/^Forcing the release: Its phased operation ledger-transfer started: finished phases debit .*new downstream key/);
    expect(audit).toMatch(/^admin: ".+" force-released "POST \/entries\/transfers" key#[0-9a-f]{16}, reason "may try again"$/);
    // The app hears the release at its commit and drops the failure it cached; until then it replays it.
    await until(async () => (await transfer('cli-abandoned')).status === 201, 10_000);
  });

  it('refuses what would break the guarantee with exit code 4 and the problem, and a call without a reason with 2', async () => {
    const gate = app.app.get(NotifyGate);
    gate.mode = 'hold';
    const running = transfer('cli-held');
    await until(async () => gate.heldCount === 1);
    const refused = await cli(env, '--json', 'release', 'cli-held', '--tenant', 'acme', '--operation', 'POST /entries/transfers', '--reason', 'stuck?');
    expect(refused.code).toBe(EXIT.refused);
    expect(refused.json()).toMatchObject({ type: 'urn:nest-idempotency:problem:admin-lease-live', status: 409 });
    expect(refused.err).toContain('admin: ');
    gate.release();
    gate.mode = 'pass';
    expect((await running).status).toBe(201);
    expect((await cli(env, 'release', 'cli-held', '--tenant', 'acme', '--operation', 'POST /entries/transfers')).code).toBe(EXIT.usage);
    expect((await cli({}, 'unfinished')).code).toBe(EXIT.usage);
    expect((await cli({ DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none' }, 'unfinished')).code).toBe(EXIT.failed);
  });

  it('writes one audit line per action with what the caller typed quoted, and none for ids that are not event ids', async () => {
    const operation = 'POST /entries" key#0, reason "x"\nadmin: "root" released "POST /entries';
    const refused = await cli(env, 'release', 'cli-none', '--tenant', 'acme', '--operation', operation, '--reason', 'r\u001b[2J\u009b31m', '--as', 'on-call\nadmin: "root"');
    expect(refused.code).toBe(EXIT.nothing);
    const lines = refused.err.split('\n').filter((line) => line.startsWith('admin: '));
    expect(lines).toEqual([
      `admin: "on-call\\nadmin: \\"root\\"" refused to release ${JSON.stringify(operation)} key#${lines[0]?.match(/key#([0-9a-f]{16})/)?.[1]} (urn:nest-idempotency:problem:admin-not-found), reason "r\\u001b[2J\\u009b31m"`,
    ]);
    const malformed = await cli(env, 'requeue', 'not-an-id\nadmin: "root" requeued', '--reason', 'x');
    expect(malformed.code).toBe(EXIT.usage);
    expect(malformed.err.split('\n').filter((line) => line.startsWith('admin: '))).toEqual([]);
  });

  it('lists dead letters and requeues them, then refuses an event that is no longer dead', async () => {
    publisher.rejections.set('poison', Infinity);
    await request(app.url).post('/eventful').set('Idempotency-Key', 'cli-dead').set('X-Tenant', 'acme').send({ label: 'dead', events: [{ type: 'poison', key: 'cli' }] }).expect(201);
    let dead: Array<{ id: string; type: string }> = [];
    await until(async () => {
      const listed = await cli(env, '--json', 'dead-letters');
      dead = listed.code === EXIT.done ? listed.json().items : [];
      return dead.length === 1;
    });
    publisher.rejections.delete('poison');
    const requeued = await cli(env, 'requeue', dead[0].id, '--reason', 'broker fixed');
    expect([requeued.code, requeued.out]).toEqual([EXIT.done, `Requeued 1 dead letter(s): ${dead[0].id}.`]);
    await until(async () => publisher.published.some((message) => message.id === dead[0].id));
    expect((await cli(env, 'requeue', dead[0].id, '--reason', 'twice')).code).toBe(EXIT.refused);
    expect((await cli(env, 'dead-letters')).code).toBe(EXIT.nothing);
  });

  it('escapes the control characters of stored text on a terminal, and keeps them as data in --json', async () => {
    // A screen clear, colours, an OSC 52 clipboard write, a C1 CSI, backspaces over the text, DEL and a line of its own.
    const hostile = '\u001b[2J\u001b[31mred\u001b[0m \u001b]52;c;cHduZWQ=\u0007 \u009b2J paid\b\b\b\bdue\u007f\nadmin: forged';
    const shownAs = '\\u001b[2J\\u001b[31mred\\u001b[0m \\u001b]52;c;cHduZWQ=\\u0007 \\u009b2J paid\\b\\b\\b\\bdue\\u007f\\nadmin: forged';
    await entry('cli-hostile', hostile).expect(201);
    await abandon('cli-hostile-op');
    const eventType = `hostile ${hostile}`;
    publisher.rejections.set(eventType, Infinity);
    await request(app.url).post('/eventful').set('Idempotency-Key', 'cli-hostile-event').set('X-Tenant', 'acme').send({ label: 'hostile', events: [{ type: eventType, key: hostile }] }).expect(201);
    await until(async () => (await cli(env, '--json', 'dead-letters')).out.includes('hostile'));
    publisher.rejections.delete(eventType);

    const failed = await cli(env, 'fail', 'cli-hostile-op', ...TRANSFERS, '--reason', hostile);
    const record = await cli(env, 'inspect', 'cli-hostile-op', ...TRANSFERS);
    const answer = await cli(env, 'inspect', 'cli-hostile', '--tenant', 'acme', '--operation', 'POST /entries');
    const deadLetters = await cli(env, 'dead-letters');
    for (const run of [failed, record, answer, deadLetters]) expect([run.code, `${run.out}\n${run.err}`]).toEqual([EXIT.done, expect.not.stringMatching(ACTIVE)]);
    expect(record.out).toContain(`: ${shownAs}`);
    // The audit line and the answer's body are JSON, which escaped C0 itself; the CLI escapes what JSON leaves raw.
    for (const json of [failed.err, answer.out]) expect(json).toContain('\\u009b2J paid\\b\\b\\b\\bdue\\u007f');
    expect(deadLetters.out).toContain(`hostile ${shownAs}`);

    const data = [await cli(env, '--json', 'inspect', 'cli-hostile-op', ...TRANSFERS), await cli(env, '--json', 'dead-letters')];
    for (const run of data) expect(run.out).not.toMatch(ACTIVE);
    expect(data[0].json().failureReason).toContain(hostile);
    expect(data[1].json().items).toContainEqual(expect.objectContaining({ type: eventType, orderingKey: hostile }));
    expect((await cli(env, 'requeue', '--all', '--reason', 'hostile event tested')).code).toBe(EXIT.done);
  });

  it('refuses a --retention that is not a positive number of ms up to 365 days with exit code 2, before it writes anything', async () => {
    await abandon('cli-retention');
    for (const retention of ['abc', '-1', '0', '1e15', String(366 * 24 * 60 * 60 * 1000)]) {
      const refused = await cli(env, '--json', 'fail', 'cli-retention', ...TRANSFERS, '--reason', 'refunded', '--retention', retention);
      expect([retention, refused.code, refused.json().type]).toEqual([retention, EXIT.usage, 'urn:nest-idempotency:problem:cli-usage']);
    }
    expect((await cli(env, '--json', 'inspect', 'cli-retention', ...TRANSFERS)).json().status).toBe('in_progress');
    expect((await cli(env, 'fail', 'cli-retention', ...TRANSFERS, '--reason', 'refunded', '--retention', '60000')).code).toBe(EXIT.done);
  });

  it('reads an instant without a zone as UTC whatever TZ the shell has, and refuses what is not ISO 8601', async () => {
    await entry('cli-zone', 'zone').expect(201);
    const [claimed] = (await cli(env, '--json', 'inspect', 'cli-zone')).json().items;
    const zoneless = (offsetMs: number) => new Date(Date.parse(claimed.createdAt) + offsetMs).toISOString().slice(0, 19);
    for (const TZ of ['UTC', 'Asia/Tokyo']) {
      const found = await bin({ ...env, TZ }, '--json', 'inspect', 'cli-zone', '--since', zoneless(-60_000), '--until', zoneless(60_000));
      expect([TZ, found.code]).toEqual([TZ, EXIT.done]);
      expect(JSON.parse(found.stdout).items.map((record: { key: string }) => record.key)).toEqual(['cli-zone']);
    }
    const words = await cli(env, 'inspect', '--since', 'June 1 2025');
    expect([words.code, words.err]).toEqual([EXIT.usage, expect.stringContaining('one without a zone is UTC')]);
  });

  it('prints a problem document on stdout for every failure with --json, and names the migration a missing table needs', async () => {
    const unreachable = await cli({ DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none' }, '--json', 'unfinished');
    expect([unreachable.code, unreachable.json().type]).toEqual([EXIT.failed, 'urn:nest-idempotency:problem:cli-failed']);
    expect(unreachable.json().detail).toMatch(/ECONNREFUSED/);
    for (const called of [await cli({}, '--json', 'unfinished'), await cli(env, '--json', 'unfinished', '--nope'), await cli(env, '--json')]) {
      expect([called.code, called.json().type]).toEqual([EXIT.usage, 'urn:nest-idempotency:problem:cli-usage']);
    }

    const offPath = await cli({ ...env, DATABASE_URL: `${db.url}?options=${encodeURIComponent('-c search_path=nowhere')}` }, 'unfinished');
    expect([offPath.code, offPath.err]).toEqual([EXIT.usage, expect.stringContaining('run the migration CreateIdempotencyRecords1764400000000')]);
    const noSchema = await cli(env, '--json', '--schema', 'nowhere', 'inspect');
    expect([noSchema.code, noSchema.json().type]).toEqual([EXIT.usage, 'urn:nest-idempotency:problem:cli-usage']);
    expect(noSchema.json().detail).toContain('CreateIdempotencyRecords1764400000000');
    await db.query('CREATE SCHEMA records_only; CREATE TABLE records_only.idempotency_records (LIKE public.idempotency_records)');
    const noOutbox = await cli(env, '--json', '--schema', 'records_only', 'dead-letters');
    expect([noOutbox.code, noOutbox.json().type]).toEqual([EXIT.usage, 'urn:nest-idempotency:problem:cli-usage']);
    expect(noOutbox.json().detail).toContain('CreateIdempotencyOutbox1764400010000');
  });

  it('exits 0 for nothing found with --empty-ok, for a monitoring job, and still fails on a failure', async () => {
    expect((await cli(env, 'unfinished', '--tenant', 'nobody')).code).toBe(EXIT.nothing);
    const none = await cli(env, 'unfinished', '--tenant', 'nobody', '--empty-ok');
    expect([none.code, none.err]).toEqual([EXIT.done, 'Nothing found.']);
    const listed = await cli(env, '--json', '--empty-ok', 'inspect', 'no-such-key');
    expect([listed.code, listed.json().items]).toEqual([EXIT.done, []]);
    expect((await cli({ DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none' }, '--empty-ok', 'unfinished')).code).toBe(EXIT.failed);
  });
});
