import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { randomUUID } from 'node:crypto';
import { resolve } from 'node:path';
import request from 'supertest';
import { eventually, ON_TYPEORM_1, type Twin, TWINS, uniqueLabel } from '../support/faithful-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

/** test/support/textbook-app.ts, compiled by `npm test`'s build, in a process of its own on this suite's TypeORM. */
async function startTextbookApp(db: TestDatabase): Promise<{ child: ChildProcess; url: string; output: () => string }> {
  const hooks = ON_TYPEORM_1 ? [] : ['--import', resolve('test/support/typeorm-0.3.hooks.mjs')];
  const child = spawn(process.execPath, [...hooks, resolve('dist/test/support/textbook-app.js')], {
    env: { ...process.env, DATABASE_URL: db.url, NO_COLOR: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const started = await eventually(() => /listening on /.test(output) || child.exitCode !== null, 30_000);
  const url = /listening on (http:\/\/[\d.:]+)/.exec(output)?.[1];
  if (!started || !url) throw new Error(`the textbook app did not start: ${output}`);
  if (!output.includes(`on TypeORM ${ON_TYPEORM_1 ? '1.x' : '0.3'}`)) throw new Error(`the textbook app runs on another TypeORM than this suite: ${output}`);
  return { child, url, output: () => output };
}

/**
 * Item 7 of issue 40: the QueryRunner transaction of NestJS's documentation,
 * copied as printed, with the process killed (SIGKILL) between its
 * commitTransaction() and the request's answer. Without the module the
 * commit kept the order and the client's retry places it again; with it,
 * that commit was a savepoint of the request's transaction, which the crash
 * rolled back, and the retry places the one order.
 */
describe('a crash between a QueryRunner’s commit and the answer', () => {
  let db: TestDatabase;
  let app: Awaited<ReturnType<typeof startTextbookApp>> | undefined;
  const rows = async (label: string) => Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM textbook_orders WHERE label = $1`, [label]))[0].n);

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(`CREATE TABLE textbook_orders (id serial PRIMARY KEY, label text NOT NULL, part text NOT NULL)`);
  });
  afterAll(async () => {
    if (app?.child.exitCode === null) app.child.kill('SIGKILL');
    await db?.drop();
  });

  it(`places one order, not two, on TypeORM ${ON_TYPEORM_1 ? '1.x' : '0.3'}`, async () => {
    const label: Record<Twin, string> = { with: uniqueLabel('crash-with'), without: uniqueLabel('crash-without') };
    const key: Record<Twin, string> = { with: randomUUID(), without: randomUUID() };
    const order = (url: string, twin: Twin, hang: boolean) => request(url).post(`/orders/${twin}`).set('Idempotency-Key', key[twin]).send({ label: label[twin], hang });

    app = await startTextbookApp(db);
    const crashed = app;
    for (const twin of TWINS) order(crashed.url, twin, true).catch(() => undefined);
    expect(await eventually(() => TWINS.every((twin) => crashed.output().includes(`committed ${label[twin]}`)), 10_000), crashed.output()).toBe(true);
    crashed.child.kill('SIGKILL');
    await once(crashed.child, 'exit');
    expect([await rows(label.with), await rows(label.without)]).toEqual([0, 2]);

    app = await startTextbookApp(db);
    const retries = await Promise.all(TWINS.map((twin) => order(app!.url, twin, false)));
    expect(retries.map((answer) => answer.status)).toEqual([201, 201]);
    expect([await rows(label.with), await rows(label.without)]).toEqual([2, 4]);
    const replay = await order(app.url, 'with', false);
    expect([replay.status, replay.headers['idempotent-replayed']]).toEqual([201, 'true']);
    expect(await rows(label.with)).toBe(2);
    app.child.kill('SIGKILL');
  });
});
