import { setTimeout as sleep } from 'node:timers/promises';
import { countRows, FAITHFUL_ROWS_SCHEMA, type FaithfulApp, type HandlerContext, type PairedRoute, send, startFaithfulApp, type Twin, TWINS, uniqueLabel } from '../support/faithful-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

const insert = (dataSource: HandlerContext['dataSource'], label: string, step: string) => dataSource.query(`INSERT INTO faithful_rows (label, step) VALUES ($1, $2)`, [label, step]);

/** A raw COMMIT between two inserts. */
async function commitBetween({ dataSource }: HandlerContext, { label }: { label: string }) {
  await insert(dataSource, label, 'first');
  await dataSource.query('COMMIT');
  await insert(dataSource, label, 'second');
  return { label };
}

/** BEGIN … COMMIT around an insert, between two others. */
async function beginCommit({ dataSource }: HandlerContext, { label }: { label: string }) {
  await insert(dataSource, label, 'before');
  await dataSource.query('BEGIN');
  await insert(dataSource, label, 'inside');
  await dataSource.query('COMMIT');
  await insert(dataSource, label, 'after');
  return { label };
}

/** BEGIN … ROLLBACK around an insert: the insert is undone. */
async function beginRollback({ dataSource }: HandlerContext, { label }: { label: string }) {
  await dataSource.query('BEGIN');
  await insert(dataSource, label, 'rolled back');
  await dataSource.query('ROLLBACK');
  await insert(dataSource, label, 'after');
  return { label };
}

/** A COMMIT inside a transaction() callback, where TypeORM ends the transaction itself. */
async function commitInsideTransaction({ dataSource }: HandlerContext, { label }: { label: string }) {
  await dataSource.transaction(async (manager) => {
    await manager.query(`INSERT INTO faithful_rows (label, step) VALUES ($1, 'first')`, [label]);
    await manager.query('COMMIT');
    await manager.query(`INSERT INTO faithful_rows (label, step) VALUES ($1, 'second')`, [label]);
  });
  return { label };
}

/** A QueryRunner's own raw BEGIN and COMMIT. */
async function queryRunnerBeginCommit({ dataSource }: HandlerContext, { label, fail }: { label: string; fail?: boolean }) {
  const queryRunner = dataSource.createQueryRunner();
  await queryRunner.query('BEGIN');
  await queryRunner.query(`INSERT INTO faithful_rows (label, step) VALUES ($1, 'inside')`, [label]);
  await queryRunner.query('COMMIT');
  await queryRunner.release();
  if (fail) throw new Error('failed after the COMMIT');
  return { label };
}

/** A COMMIT on the raw connection a QueryRunner's connect() answers, after a write, then a failure. */
async function rawClientCommit({ dataSource }: HandlerContext, { label }: { label: string }) {
  const queryRunner = dataSource.createQueryRunner();
  const client = (await queryRunner.connect()) as { query(sql: string): Promise<unknown> };
  await queryRunner.query(`INSERT INTO faithful_rows (label, step) VALUES ($1, 'before')`, [label]);
  let refused: string | undefined;
  await client.query('COMMIT').catch((error: Error) => (refused = error.name));
  await queryRunner.release();
  throw new Error(`failed after the raw COMMIT (${refused ?? 'sent'})`);
}

/** A statement caught where the handler can: its name and message, and a write after it. */
async function caught({ dataSource }: HandlerContext, { label, sql }: { label: string; sql: string }) {
  let failure: { name: string; message: string } | undefined;
  try {
    await dataSource.query(sql);
  } catch (error) {
    failure = { name: (error as Error).name, message: (error as Error).message };
  }
  await insert(dataSource, label, 'after');
  return { failure };
}

/** The shape: a short transaction() takes a row lock with NOWAIT (or under a lock_timeout), then 800 ms of work. */
async function lockThenWork({ dataSource }: HandlerContext, { label, how }: { label: string; how: 'nowait' | 'lock_timeout' }) {
  await dataSource.transaction(async (manager) => {
    if (how === 'nowait') await manager.query(`SELECT id FROM faithful_rows WHERE label = $1 FOR UPDATE NOWAIT`, [label]);
    else {
      await manager.query(`SET LOCAL lock_timeout = '100ms'`);
      await manager.query(`SELECT id FROM faithful_rows WHERE label = $1 FOR UPDATE`, [label]);
    }
  });
  await sleep(800);
  return { label };
}

/** SET ROLE without RESET, then an insert: the role stays the connection's. */
async function setRole({ dataSource }: HandlerContext, { label }: { label: string }) {
  await dataSource.query('SET ROLE pg_write_all_data');
  await insert(dataSource, label, 'as pg_write_all_data');
  return { label };
}

/** DEALLOCATE ALL, then an insert. */
async function deallocate({ dataSource }: HandlerContext, { label }: { label: string }) {
  await dataSource.query('DEALLOCATE ALL');
  await insert(dataSource, label, 'after');
  return { label };
}

/** An insert, answering the role the handler ran as. */
async function plain({ dataSource }: HandlerContext, { label }: { label: string }) {
  await insert(dataSource, label, 'plain');
  const [{ role }] = await dataSource.query(`SELECT current_user AS role`);
  return { label, role };
}

/** What a route of the app's with no @Idempotent() may do to every pooled connection: leave a role on it. */
async function setRoleEverywhere({ dataSource }: HandlerContext) {
  const runners = [dataSource.createQueryRunner(), dataSource.createQueryRunner()];
  await Promise.all(runners.map((runner) => runner.connect()));
  for (const runner of runners) await runner.query('SET ROLE pg_write_all_data');
  for (const runner of runners) await runner.release();
  return {};
}

/** What a route of the app's with no @Idempotent() may do to every pooled connection: drop its prepared statements. */
async function deallocateEverywhere({ dataSource }: HandlerContext) {
  const runners = [dataSource.createQueryRunner(), dataSource.createQueryRunner()];
  await Promise.all(runners.map((runner) => runner.connect()));
  for (const runner of runners) await runner.query('DISCARD ALL');
  for (const runner of runners) await runner.release();
  return {};
}

/**
 * Items 2, 4 and 5 of issue 40: statements of the app's that start, end or
 * escape a transaction keep their meaning for the transaction they end, or
 * are refused with the fix; lock conflicts the module lengthened answer 503;
 * the module's statements hold whatever session state the app changed.
 * Each route runs twice, with `@Idempotent()` and without, through the
 * packed ES build.
 */
describe('statements that end, escape or reshape the request’s transaction', () => {
  let db: TestDatabase;
  const rows = (label: string, where = 'true') => countRows(db, 'faithful_rows', `label = $1 AND ${where}`, [label]);
  const labels = (name: string): Record<Twin, string> => ({ with: uniqueLabel(`${name}-with`), without: uniqueLabel(`${name}-without`) });
  const records = async (key: string) => Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM idempotency_records WHERE key = $1`, [key]))[0].n);

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(FAITHFUL_ROWS_SCHEMA);
  });
  afterAll(async () => {
    await db?.drop();
  });

  describe('BEGIN, COMMIT and ROLLBACK of the app’s', () => {
    let app: FaithfulApp;
    beforeAll(async () => {
      const routes: PairedRoute[] = [
        { path: 'commit-between', handle: commitBetween },
        { path: 'begin-commit', handle: beginCommit },
        { path: 'begin-rollback', handle: beginRollback },
        { path: 'commit-inside', handle: commitInsideTransaction },
        { path: 'runner-begin-commit', handle: queryRunnerBeginCommit },
        { path: 'caught', handle: caught },
        { path: 'raw-client', handle: rawClientCommit },
      ];
      app = await startFaithfulApp({ db, routes });
    });
    afterAll(async () => {
      await app?.close();
    });

    it.each([
      ['commit-between', 2],
      ['begin-commit', 3],
    ])('%s: answers and writes as without the module, and its retry replays without writing again', async (path, written) => {
      const label = labels(path);
      const answers = await Promise.all(TWINS.map((twin) => send(app, path, twin, { label: label[twin] }, { key: `${label[twin]}:key` })));
      expect(answers.map((answer) => answer.status)).toEqual([201, 201]);
      expect([await rows(label.with), await rows(label.without)]).toEqual([written, written]);
      expect(await records(`${label.with}:key`)).toBe(1);
      const retry = await send(app, path, 'with', { label: label.with }, { key: `${label.with}:key` });
      expect([retry.status, retry.headers['idempotent-replayed']]).toEqual([201, 'true']);
      expect(await rows(label.with)).toBe(written);
    });

    it('rolls back what BEGIN … ROLLBACK wrapped, and keeps the rest', async () => {
      const label = labels('begin-rollback');
      const answers = await Promise.all(TWINS.map((twin) => send(app, 'begin-rollback', twin, { label: label[twin] })));
      expect(answers.map((answer) => answer.status)).toEqual([201, 201]);
      for (const twin of TWINS) expect([await rows(label[twin], `step = 'rolled back'`), await rows(label[twin], `step = 'after'`)]).toEqual([0, 1]);
    });

    it('keeps nothing of a QueryRunner’s BEGIN … COMMIT when the request then fails, and its retry writes once', async () => {
      const label = labels('runner-begin-commit');
      const failed = await Promise.all(TWINS.map((twin) => send(app, 'runner-begin-commit', twin, { label: label[twin], fail: true }, { key: `${label[twin]}:key` })));
      expect(failed.map((answer) => answer.status)).toEqual([500, 500]);
      expect([await rows(label.with), await rows(label.without)]).toEqual([0, 1]);
      const retry = await send(app, 'runner-begin-commit', 'with', { label: label.with }, { key: `${label.with}:retry` });
      expect(retry.status).toBe(201);
      expect(await rows(label.with)).toBe(1);
    });

    it('refuses a COMMIT inside a transaction() callback before it is sent, naming it and the fix, and commits nothing of the request', async () => {
      const label = uniqueLabel('commit-inside');
      for (let attempt = 0; attempt < 2; attempt++) {
        const answer = await send(app, 'commit-inside', 'with', { label }, { key: `${label}:key` });
        expect(answer.status).toBe(500);
      }
      expect(await rows(label)).toBe(0);
      expect(await records(`${label}:key`)).toBe(0);
    });

    it.each([
      ["PREPARE TRANSACTION 'nest-idempotency'", 'PREPARE TRANSACTION'],
      ['DISCARD ALL', 'DISCARD ALL'],
    ])('refuses %s where the handler catches it, naming it and IdempotencyTransactionHost.outside(), and goes on', async (sql, named) => {
      const label = labels('caught');
      const [withModule, without] = await Promise.all(TWINS.map((twin) => send(app, 'caught', twin, { label: label[twin], sql })));
      expect([withModule.status, without.status]).toEqual([201, 201]);
      expect(withModule.body.failure.name).toBe('StatementRefusedError');
      expect(withModule.body.failure.message).toContain(named);
      expect(withModule.body.failure.message).toContain('IdempotencyTransactionHost.outside(');
      for (const twin of TWINS) expect(await rows(label[twin], `step = 'after'`)).toBe(1);
    });

    it('refuses a COMMIT on the raw connection of a QueryRunner’s connect(), so that a failure after it keeps nothing', async () => {
      const label = labels('raw-client');
      const answers = await Promise.all(TWINS.map((twin) => send(app, 'raw-client', twin, { label: label[twin] })));
      expect(answers.map((answer) => answer.status)).toEqual([500, 500]);
      // Without the module the write committed on its own connection before the COMMIT, which found no transaction.
      expect([await rows(label.with), await rows(label.without)]).toEqual([0, 1]);
    });

    it.each([
      ['VACUUM faithful_rows', 'cannot run inside a transaction block'],
      ['DO $$ BEGIN COMMIT; END $$', 'invalid transaction termination'],
    ])('says how to run %s, which PostgreSQL refuses in a transaction block', async (sql, refusal) => {
      const label = uniqueLabel('own-transaction');
      const answer = await send(app, 'caught', 'with', { label, sql });
      expect(answer.body.failure.message).toContain(refusal);
      expect(answer.body.failure.message).toContain('IdempotencyTransactionHost.outside(');
    });
  });

  describe('locks the request now holds longer', () => {
    let app: FaithfulApp;
    beforeAll(async () => {
      app = await startFaithfulApp({ db, routes: [{ path: 'lock', handle: lockThenWork }] });
    });
    afterAll(async () => {
      await app?.close();
    });

    it.each(['nowait', 'lock_timeout'] as const)('answers a lock not obtained (%s) 503 with Retry-After, records nothing, and its retry goes through', async (how) => {
      const label = labels(`lock-${how}`);
      for (const twin of TWINS) await db.query(`INSERT INTO faithful_rows (label, step) VALUES ($1, 'locked')`, [label[twin]]);
      const pair = async (twin: Twin) => {
        const first = send(app, 'lock', twin, { label: label[twin], how }, { key: `${label[twin]}:first` });
        await sleep(300);
        const second = send(app, 'lock', twin, { label: label[twin], how }, { key: `${label[twin]}:second` });
        return [await first, await second];
      };
      const [withModule, without] = await Promise.all(TWINS.map(pair));
      expect(without.map((answer) => answer.status)).toEqual([201, 201]);
      expect(withModule[0].status).toBe(201);
      expect([withModule[1].status, withModule[1].headers['retry-after']]).toEqual([503, '1']);
      expect(withModule[1].body.type).toContain('transaction-conflict');
      expect(await records(`${label.with}:second`)).toBe(0);
      const retry = await send(app, 'lock', 'with', { label: label.with, how }, { key: `${label.with}:second` });
      expect(retry.status).toBe(201);
    });
  });

  describe('session state the app changes on the request’s connection', () => {
    let app: FaithfulApp;
    beforeEach(async () => {
      // An app of its own each time, with a pool of two: a role left on a connection stays with that pool only.
      const routes: PairedRoute[] = [
        { path: 'set-role', handle: setRole },
        { path: 'deallocate', handle: deallocate },
        { path: 'discard-everywhere', handle: deallocateEverywhere },
        { path: 'set-role-everywhere', handle: setRoleEverywhere },
        { path: 'plain', handle: plain },
      ];
      app = await startFaithfulApp({ db, routes, dataSource: { extra: { max: 2 } } });
    });
    afterEach(async () => {
      await app?.close();
    });

    it('records the outcome of a handler that set a role and left it, as the role the claim ran as; its retry replays', async () => {
      const label = labels('set-role');
      const answers = await Promise.all(TWINS.map((twin) => send(app, 'set-role', twin, { label: label[twin] }, { key: `${label[twin]}:key` })));
      expect(answers.map((answer) => answer.status)).toEqual([201, 201]);
      expect(await rows(label.with)).toBe(1);
      const retry = await send(app, 'set-role', 'with', { label: label.with }, { key: `${label.with}:key` });
      expect([retry.status, retry.headers['idempotent-replayed']]).toEqual([201, 'true']);
    });

    it('runs its statements as the connection’s own role where a route without the module left another, and the handler’s as that one', async () => {
      expect((await send(app, 'set-role-everywhere', 'without')).status).toBe(201);
      const label = labels('leaked-role');
      const first = await Promise.all(TWINS.flatMap((twin) => [0, 1].map((n) => send(app, 'plain', twin, { label: label[twin] }, { key: `${label[twin]}:${n}` }))));
      expect(first.map((answer) => answer.status)).toEqual([201, 201, 201, 201]);
      // The handler's own statements ran as the role the route left, as without the module.
      expect(first.map((answer) => answer.body.role)).toEqual(Array(4).fill('pg_write_all_data'));
      const replays = await Promise.all([0, 1].map((n) => send(app, 'plain', 'with', { label: label.with }, { key: `${label.with}:${n}` })));
      expect(replays.map((answer) => [answer.status, answer.headers['idempotent-replayed']])).toEqual([
        [201, 'true'],
        [201, 'true'],
      ]);
      expect([await rows(label.with), await rows(label.without)]).toEqual([2, 2]);
    });

    it('prepares its statements again on a connection whose prepared statements the handler dropped, with no 503', async () => {
      const label = uniqueLabel('deallocate');
      const answers = [];
      for (let n = 0; n < 6; n++) answers.push(await send(app, n % 2 === 0 ? 'deallocate' : 'plain', 'with', { label }));
      expect(answers.map((answer) => answer.status)).toEqual(Array(6).fill(201));
    });

    it('prepares its statements again on connections a route without the module discarded, with no 503', async () => {
      const label = uniqueLabel('discard-everywhere');
      const answers = [];
      for (let round = 0; round < 3; round++) {
        expect((await send(app, 'discard-everywhere', 'without')).status).toBe(201);
        // Two at once: one on each of the pool's two connections.
        answers.push(...(await Promise.all([0, 1].map(() => send(app, 'plain', 'with', { label })))));
      }
      expect(answers.map((answer) => answer.status)).toEqual(Array(6).fill(201));
      expect(await rows(label)).toBe(6);
    });
  });
});
