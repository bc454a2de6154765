import { ConflictException } from '@nestjs/common';
import { countRows, FAITHFUL_ROWS_SCHEMA, type FaithfulApp, type HandlerContext, meet, ON_TYPEORM_1, type PairedRoute, resetDatabaseDefault, send, setDatabaseDefault, startFaithfulApp, type Twin, TWINS, uniqueLabel } from '../support/faithful-app.js';
import QueryStream from 'pg-query-stream';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

/**
 * Takes a doctor of a ward off call if two are on call: a check, then a
 * write, in a transaction of the handler's own. At SERIALIZABLE two such
 * transactions that each took a different doctor off cannot both commit; at
 * READ COMMITTED they can, and the ward is left with none.
 */
async function takeOffCall({ dataSource }: HandlerContext, { ward, doctor }: { ward: string; doctor: string }) {
  return dataSource.transaction(async (manager) => {
    const [{ n }] = await manager.query(`SELECT count(*)::int AS n FROM doctors WHERE ward = $1 AND on_call`, [ward]);
    if (n < 2) throw new ConflictException('the last doctor on call stays on call');
    // Both requests have read the count before either writes, however the machine schedules them.
    await meet(`ward:${ward}`, 2, 500);
    await manager.query(`UPDATE doctors SET on_call = false WHERE ward = $1 AND name = $2`, [ward, doctor]);
    return { ward, doctor };
  });
}

/**
 * Moves `amount` between two accounts with two statements and no
 * transaction of the handler's own: without the module each autocommits
 * and releases its row lock at once.
 */
async function transfer({ dataSource }: HandlerContext, { from, to, amount, run }: { from: string; to: string; amount: number; run: string }) {
  await dataSource.query(`UPDATE accounts SET balance = balance - $2 WHERE name = $1`, [from, amount]);
  // The two transfers each hold their first row before either asks for the other's (a retry alone goes on after 300 ms).
  await meet(`transfer:${run}`, 2, 300);
  await dataSource.query(`UPDATE accounts SET balance = balance + $2 WHERE name = $1`, [to, amount]);
  return { from, to, amount };
}

/** Attempts of each request's retry loop (`bumpWithRetries`), by its id, and the error its last failed attempt met. */
const attempts = new Map<string, { count: number; lastError?: string }>();

/**
 * Bumps a counter at REPEATABLE READ read-then-write, in a loop that tries
 * again on a serialization failure (40001) up to 10 times, as code written
 * for that level does. Without the module each attempt is a transaction of
 * its own, with a fresh snapshot: the second one goes through.
 */
async function bumpWithRetries({ dataSource }: HandlerContext, { counter, id }: { counter: string; id: string }) {
  const tried = { count: 0 } as { count: number; lastError?: string };
  attempts.set(id, tried);
  for (;;) {
    tried.count++;
    try {
      await dataSource.transaction('REPEATABLE READ', async (manager) => {
        await manager.query(`SELECT value FROM counters WHERE name = $1`, [counter]);
        // Both have read before either writes; the loser's UPDATE waits for the winner's commit, then fails.
        if (tried.count === 1) await meet(`bump:${counter}`, 2, 300);
        await manager.query(`UPDATE counters SET value = value + 1 WHERE name = $1`, [counter]);
      });
      return { attempts: tried.count };
    } catch (error) {
      tried.lastError = (error as Error).message;
      const code = (error as { driverError?: { code?: string } }).driverError?.code ?? (error as { code?: string }).code;
      if (code !== '40001' || tried.count >= 10) throw error;
    }
  }
}

/** Per request id: what a handler met on its way (`nestedAfterConflict`, `rawClientConflict`). */
const met = new Map<string, Record<string, string>>();

/** Once per id: the handler reads, the test commits an update of the row, then the handler writes it (40001 at REPEATABLE READ). */
async function provokedOnce(id: string, read: () => Promise<unknown>, write: () => Promise<unknown>): Promise<void> {
  const first = !met.has(id);
  met.set(id, {});
  await read();
  if (first) {
    await meet(`read:${id}`, 2, 5000);
    await meet(`updated:${id}`, 2, 5000);
  }
  await write();
}

/** What the test does while a handler waits between its read and its write. */
async function updateBetween(db: TestDatabase, id: string, counter: string): Promise<void> {
  await meet(`read:${id}`, 2, 5000);
  await db.query(`UPDATE counters SET value = value + 100 WHERE name = $1`, [counter]);
  await meet(`updated:${id}`, 2, 5000);
}

/**
 * NestJS's QueryRunner transaction with a nested one (a savepoint) that
 * meets a serialization failure and rolls back, then goes on: without the
 * module, the outer transaction commits.
 */
async function nestedAfterConflict({ dataSource }: HandlerContext, { counter, id }: { counter: string; id: string }) {
  const runner = dataSource.createQueryRunner();
  await runner.connect();
  await runner.startTransaction('REPEATABLE READ');
  try {
    await runner.query(`INSERT INTO faithful_rows (label) VALUES ($1)`, [`${id}:outer`]);
    await runner.startTransaction();
    try {
      await provokedOnce(
        id,
        () => runner.query(`SELECT value FROM counters WHERE name = $1`, [counter]),
        () => runner.query(`UPDATE counters SET value = value + 1 WHERE name = $1`, [counter]),
      );
      await runner.commitTransaction();
    } catch (error) {
      met.get(id)!.inner = (error as Error).message;
      await runner.rollbackTransaction().then(
        () => (met.get(id)!.innerRollback = 'rolled back'),
        (failure: Error) => (met.get(id)!.innerRollback = failure.name),
      );
    }
    await runner.query(`INSERT INTO faithful_rows (label) VALUES ($1)`, [`${id}:after`]);
    await runner.commitTransaction();
    return { id };
  } catch (error) {
    met.get(id)!.after = (error as Error).name;
    await runner.rollbackTransaction();
    throw error;
  } finally {
    await runner.release();
  }
}

/** A serialization failure on the request's node-postgres client (a QueryRunner's `connect()`), caught; the handler answers as if nothing happened. */
async function rawClientConflict({ dataSource }: HandlerContext, { counter, id }: { counter: string; id: string }) {
  const runner = dataSource.createQueryRunner();
  const client = (await runner.connect()) as { query(text: string, values?: unknown[]): Promise<unknown> };
  try {
    await runner.query(`INSERT INTO faithful_rows (label) VALUES ($1)`, [id]);
    try {
      await provokedOnce(
        id,
        () => client.query(`SELECT value FROM counters WHERE name = $1`, [counter]),
        () => client.query(`UPDATE counters SET value = value + 1 WHERE name = $1`, [counter]),
      );
    } catch (error) {
      met.get(id)!.caught = (error as Error).message;
    }
    return { id };
  } finally {
    await runner.release();
  }
}

/** The request's node-postgres client, as a QueryRunner's `connect()` answers it. */
type PgClient = { query(statement: unknown, values?: unknown[]): unknown };

/** A statement on the raw client in one of the forms node-postgres takes: a promise's, a config's own callback, a stream's. */
async function sentAs(form: 'promise' | 'config-callback' | 'stream', client: PgClient, text: string, values: unknown[]): Promise<void> {
  if (form === 'promise') await client.query(text, values);
  else if (form === 'config-callback') await new Promise((resolve, reject) => client.query({ text, values, callback: (error: Error | null) => (error ? reject(error) : resolve(undefined)) }));
  else for await (const _row of client.query(new QueryStream(`${text} RETURNING value`, values)) as QueryStream);
}

/**
 * A conflict on the raw client inside a QueryRunner transaction of the
 * handler's, caught: the transaction rolls back, and the handler answers
 * that it gave up. Without the module, at READ COMMITTED, the write goes
 * through.
 */
async function rawClientGivesUp({ dataSource }: HandlerContext, { counter, id, form }: { counter: string; id: string; form: 'promise' | 'config-callback' | 'stream' }) {
  const runner = dataSource.createQueryRunner();
  const client = (await runner.connect()) as PgClient;
  await runner.startTransaction();
  try {
    await provokedOnce(
      id,
      () => client.query(`SELECT value FROM counters WHERE name = $1`, [counter]) as Promise<unknown>,
      () => sentAs(form, client, `UPDATE counters SET value = value + 1 WHERE name = $1`, [counter]),
    );
    await runner.commitTransaction();
    return { gaveUp: false };
  } catch {
    await runner.rollbackTransaction().then(
      () => (met.get(id)!.rollback = 'rolled back'),
      (failure: Error) => (met.get(id)!.rollback = failure.name),
    );
    const state = runner as unknown as { transactionDepth: number; isTransactionActive: boolean };
    met.get(id)!.after = `depth ${state.transactionDepth}, active ${state.isTransactionActive}`;
    return { gaveUp: true };
  } finally {
    await runner.release();
  }
}

const ROUTES: PairedRoute[] = [
  { path: 'doctors', handle: takeOffCall },
  {
    path: 'set-transaction',
    handle: ({ dataSource }, { label }: { label: string }) =>
      dataSource.transaction(async (manager) => {
        await manager.query(`SET TRANSACTION ISOLATION LEVEL SERIALIZABLE`);
        await manager.query(`INSERT INTO faithful_rows (label) VALUES ($1)`, [label]);
        return { label };
      }),
  },
  {
    path: 'serializable-route',
    idempotent: { isolation: 'SERIALIZABLE' },
    handle: async ({ dataSource }) => (await dataSource.query(`SHOW transaction_isolation`))[0],
  },
  {
    path: 'serializable-unit',
    handle: async ({ dataSource }, { label }: { label: string }) => {
      try {
        await dataSource.transaction('SERIALIZABLE', (manager) => manager.query(`INSERT INTO faithful_rows (label) VALUES ($1)`, [label]));
        return { ran: true };
      } catch (error) {
        return { refused: (error as Error).message };
      }
    },
  },
  { path: 'transfer', handle: transfer },
  { path: 'bump', idempotent: { isolation: 'REPEATABLE READ' }, handle: bumpWithRetries },
  { path: 'nested-after-conflict', idempotent: { isolation: 'REPEATABLE READ' }, handle: nestedAfterConflict },
  { path: 'raw-client-conflict', idempotent: { isolation: 'REPEATABLE READ' }, handle: rawClientConflict },
  { path: 'raw-client-gives-up', idempotent: { isolation: 'REPEATABLE READ' }, handle: rawClientGivesUp },
  {
    // A slow write with its key claimed at SERIALIZABLE and at REPEATABLE READ, where the claim is the key's record.
    path: 'serializable-write',
    idempotent: { isolation: 'SERIALIZABLE', wait: 5000 },
    handle: (context, body: { label: string }) => countedWrite(context, body),
  },
  {
    // A write no other request's reads or writes touch: at SERIALIZABLE without the module, nothing can fail it.
    path: 'serializable-own-row',
    idempotent: { isolation: 'SERIALIZABLE' },
    handle: async ({ dataSource }, { label }: { label: string }) => {
      await dataSource.query(`INSERT INTO faithful_rows (label) VALUES ($1)`, [label]);
      await new Promise((resolve) => setTimeout(resolve, 30));
      return { label };
    },
  },
  {
    path: 'repeatable-write',
    idempotent: { isolation: 'REPEATABLE READ', wait: 5000 },
    handle: (context, body: { label: string }) => countedWrite(context, body),
  },
];

/** How many times each label's handler ran. */
const runs = new Map<string, number>();

/** Counts its run, then writes its row slowly enough for duplicates to arrive while it holds the key. */
async function countedWrite({ dataSource }: HandlerContext, { label }: { label: string }) {
  runs.set(label, (runs.get(label) ?? 0) + 1);
  await dataSource.query(`INSERT INTO faithful_rows (label) VALUES ($1)`, [label]);
  await new Promise((resolve) => setTimeout(resolve, 150));
  return { label };
}

/**
 * Item 1 of issue 33 ("the app's isolation level is silently lowered") and
 * item 5 ("deadlocks and serialization failures answer a plain 500"): the
 * request's transaction runs at the isolation level the handler's own
 * transactions would get, and the failures PostgreSQL gives a longer
 * transaction are answered as retryable. Each route runs twice, with
 * `@Idempotent()` and without, through the packed ES build.
 */
describe('the isolation level and the retryable failures of the request’s transaction', () => {
  let db: TestDatabase;
  /** On the database's defaults (READ COMMITTED). */
  let app: FaithfulApp;
  const onCall = async (ward: string) => countRows(db, 'doctors', 'ward = $1 AND on_call', [ward]);
  const seedWard = async (ward: string) => db.query(`INSERT INTO doctors (ward, name, on_call) VALUES ($1, 'alice', true), ($1, 'bob', true)`, [ward]);
  /** Two requests with different keys, each taking another doctor of the ward off call. */
  const bothOffCall = async (target: FaithfulApp, twin: Twin) => {
    const ward = uniqueLabel(`ward-${twin}`);
    await seedWard(ward);
    const answers = await Promise.all(['alice', 'bob'].map((doctor) => send(target, 'doctors', twin, { ward, doctor })));
    return { answers, onCall: await onCall(ward) };
  };
  /** What must hold with the module: one doctor stays on call, and the request that lost answers 503 with `Retry-After`. */
  const expectRetryableLoser = ({ answers, onCall }: Awaited<ReturnType<typeof bothOffCall>>) => {
    expect(onCall).toBeGreaterThanOrEqual(1);
    expect(answers.map((answer) => answer.status).sort()).toEqual([201, 503]);
    expect(answers.find((answer) => answer.status === 503)?.headers['retry-after']).toMatch(/^\d+$/);
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(`${FAITHFUL_ROWS_SCHEMA};
      CREATE TABLE doctors (ward text NOT NULL, name text NOT NULL, on_call boolean NOT NULL, PRIMARY KEY (ward, name));
      CREATE TABLE accounts (name text PRIMARY KEY, balance int NOT NULL);
      CREATE TABLE counters (name text PRIMARY KEY, value int NOT NULL)`);
    // Found in a tenth of the default second: the deadlock case waits for the detection.
    await setDatabaseDefault(db, 'deadlock_timeout', `'100ms'`);
    app = await startFaithfulApp({ db, routes: ROUTES });
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  describe('the isolation level the app chose', () => {
    it('runs a route with @Idempotent({ isolation: SERIALIZABLE }) at SERIALIZABLE on a READ COMMITTED database', async () => {
      const [withModule, without] = await Promise.all(TWINS.map((twin) => send(app, 'serializable-route', twin)));
      expect(without.body).toEqual({ transaction_isolation: 'read committed' });
      expect([withModule.status, withModule.body]).toEqual([201, { transaction_isolation: 'serializable' }]);
    });

    it('answers concurrent SERIALIZABLE requests that share nothing, whatever plan the records table gets: the module reads only its own row', async () => {
      // The planner takes an analysed empty table for one to scan whole, which at SERIALIZABLE locks every key against every other.
      await db.query(`DELETE FROM idempotency_records; ANALYZE idempotency_records`);
      const label = uniqueLabel('own-row');
      for (const twin of TWINS) {
        const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => send(app, 'serializable-own-row', twin, { label: `${label}-${twin}-${i}` })));
        expect(answers.map((answer) => answer.status)).toEqual(Array(30).fill(201));
      }
    });

    it('refuses transaction(SERIALIZABLE) in a READ COMMITTED route with an error that names the route option isolation', async () => {
      const label = uniqueLabel('serializable-unit');
      const [withModule, without] = await Promise.all(TWINS.map((twin) => send(app, 'serializable-unit', twin, { label: `${label}-${twin}` })));
      expect(without.body).toEqual({ ran: true });
      // The option's name, as in `@Idempotent({ isolation: 'SERIALIZABLE' })`: not only the words "isolation level".
      expect(withModule.body.refused).toMatch(/\bisolation\b(?! level)/);
    });

    it('keeps the invariant of a DataSource with isolationLevel SERIALIZABLE: the loser of two concurrent requests answers 503 with Retry-After', async (context) => {
      context.skip(!ON_TYPEORM_1, 'TypeORM 0.3 has no isolationLevel option on a DataSource');
      const serializable = await startFaithfulApp({ db, routes: ROUTES, dataSource: { isolationLevel: 'SERIALIZABLE' } });
      try {
        // Without the module the handler's transaction() runs at the DataSource's level: one of the two fails.
        expect((await bothOffCall(serializable, 'without')).onCall).toBe(1);
        expectRetryableLoser(await bothOffCall(serializable, 'with'));
      } finally {
        await serializable.close();
      }
    });

    it('runs at the database’s level on TypeORM 0.3, which ignores an isolationLevel given to its DataSource, as without the module', async (context) => {
      context.skip(ON_TYPEORM_1, 'TypeORM 1.x starts its transactions at the DataSource’s isolationLevel');
      const given = await startFaithfulApp({
        db,
        routes: [{ path: 'level', handle: async ({ dataSource }) => dataSource.transaction(async (manager) => (await manager.query(`SHOW transaction_isolation`))[0]) }],
        dataSource: { isolationLevel: 'SERIALIZABLE' } as object,
      });
      try {
        const [withModule, without] = await Promise.all(TWINS.map((twin) => send(given, 'level', twin)));
        expect(without.body).toEqual({ transaction_isolation: 'read committed' });
        expect(withModule.body).toEqual(without.body);
      } finally {
        await given.close();
      }
    });

    it('follows a default_transaction_isolation changed while it runs, on the connections made since, as without the module', async () => {
      const application = uniqueLabel('level-follower');
      const follower = await startFaithfulApp({
        db,
        routes: [{ path: 'level', handle: async ({ dataSource }) => dataSource.transaction(async (manager) => (await manager.query(`SHOW transaction_isolation`))[0]) }],
        dataSource: { extra: { application_name: application } },
      });
      const levels = async () => (await Promise.all(TWINS.map((twin) => send(follower, 'level', twin)))).map((answer) => (answer.status === 201 ? answer.body.transaction_isolation : answer.status));
      try {
        expect(await levels()).toEqual(['read committed', 'read committed']);
        await setDatabaseDefault(db, 'default_transaction_isolation', `'serializable'`);
        // The pool makes new connections, which the new default reaches; a request may meet a connection ended under it first.
        await db.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, [application]);
        let answered: unknown[] = [];
        for (let attempt = 0; attempt < 10; attempt++) {
          answered = await levels();
          if (answered.every((level) => typeof level === 'string')) break;
        }
        expect(answered).toEqual(['serializable', 'serializable']);
      } finally {
        await follower.close();
        await resetDatabaseDefault(db, 'default_transaction_isolation');
      }
    });

    describe('on a database whose default_transaction_isolation is serializable', () => {
      let serializable: FaithfulApp;
      beforeAll(async () => {
        await setDatabaseDefault(db, 'default_transaction_isolation', `'serializable'`);
        serializable = await startFaithfulApp({ db, routes: ROUTES });
      });
      afterAll(async () => {
        await serializable?.close();
        await resetDatabaseDefault(db, 'default_transaction_isolation');
      });

      it('keeps a check-then-write invariant: the loser of two concurrent requests answers 503 with Retry-After', async () => {
        expect((await bothOffCall(serializable, 'without')).onCall).toBe(1);
        expectRetryableLoser(await bothOffCall(serializable, 'with'));
      });

      it('lets a transaction() callback open with SET TRANSACTION ISOLATION LEVEL SERIALIZABLE, as without the module', async () => {
        const label = uniqueLabel('set-transaction');
        const [withModule, without] = await Promise.all(TWINS.map((twin) => send(serializable, 'set-transaction', twin, { label: `${label}-${twin}` })));
        expect(without.status).toBe(201);
        expect(withModule.status).toBe(201);
        expect(await countRows(db, 'faithful_rows', 'label = $1', [`${label}-with`])).toBe(1);
      });
    });
  });

  describe('the key at REPEATABLE READ and SERIALIZABLE', () => {
    it.each(['serializable-write', 'repeatable-write'])('%s: runs the handler once for 10 concurrent duplicates, which replay its answer, and once for a sequential retry', async (path) => {
      const label = uniqueLabel(path);
      const key = uniqueLabel(`${path}-key`);
      const first = send(app, path, 'with', { label }, { key });
      await new Promise((resolve) => setTimeout(resolve, 30));
      const answers = await Promise.all([first, ...Array.from({ length: 9 }, () => send(app, path, 'with', { label }, { key }))]);
      expect(runs.get(label)).toBe(1);
      expect(answers.map((answer) => answer.status)).toEqual(Array(10).fill(201));
      expect(answers.filter((answer) => answer.headers['idempotent-replayed'] === 'true')).toHaveLength(9);
      const retry = await send(app, path, 'with', { label }, { key });
      expect([retry.status, retry.headers['idempotent-replayed'], runs.get(label)]).toEqual([201, 'true', 1]);
      expect(await countRows(db, 'faithful_rows', 'label = $1', [label])).toBe(1);
    });
  });

  describe('deadlocks and serialization failures are retryable', () => {
    it('answers a deadlocked transfer 503 with Retry-After, runs its retry with the same key, and the balances add up', async () => {
      for (const twin of TWINS) {
        const run = uniqueLabel(`transfer-${twin}`);
        const [a, b] = [`${run}:a`, `${run}:b`];
        await db.query(`INSERT INTO accounts (name, balance) VALUES ($1, 100), ($2, 100)`, [a, b]);
        const keys = [`${run}:ab`, `${run}:ba`];
        const bodies = [
          { from: a, to: b, amount: 10, run },
          { from: b, to: a, amount: 10, run },
        ];
        const answers = await Promise.all(bodies.map((body, i) => send(app, 'transfer', twin, body, { key: keys[i] })));
        if (twin === 'without') {
          // Each statement autocommits: no lock outlives it, and both transfers go through.
          expect(answers.map((answer) => answer.status)).toEqual([201, 201]);
        } else {
          for (const answer of answers) {
            expect(answer.status === 201 || answer.status === 503, `answered ${answer.status}: ${answer.text}`).toBe(true);
            if (answer.status === 503) expect(answer.headers['retry-after']).toMatch(/^\d+$/);
          }
          for (const [i, answer] of answers.entries()) {
            if (answer.status === 503) expect((await send(app, 'transfer', twin, bodies[i], { key: keys[i] })).status).toBe(201);
          }
        }
        const balances = await db.query<{ name: string; balance: number }>(`SELECT name, balance FROM accounts WHERE name IN ($1, $2) ORDER BY name`, [a, b]);
        expect(balances).toEqual([
          { name: a, balance: 100 },
          { name: b, balance: 100 },
        ]);
      }
    });

    // A retry inside the request runs on the request's snapshot and cannot succeed: the loop ends at its next statement, not after its last attempt.
    it('ends a retry loop inside the handler at its next statement after a serialization failure, with an error that names the fix; the client’s retry goes through', async () => {
      for (const twin of TWINS) {
        const counter = uniqueLabel(`bump-${twin}`);
        await db.query(`INSERT INTO counters (name, value) VALUES ($1, 0)`, [counter]);
        const ids = [`${counter}:1`, `${counter}:2`];
        const answers = await Promise.all(ids.map((id) => send(app, 'bump', twin, { counter, id }, { key: id })));
        if (twin === 'without') {
          expect(answers.map((answer) => answer.status)).toEqual([201, 201]);
          expect(ids.map((id) => attempts.get(id)?.count).sort()).toEqual([1, 2]);
        } else {
          expect(answers.map((answer) => answer.status).sort()).toEqual([201, 503]);
          const loser = ids[answers.findIndex((answer) => answer.status === 503)];
          expect(answers.find((answer) => answer.status === 503)?.headers['retry-after']).toMatch(/^\d+$/);
          expect(attempts.get(loser)).toEqual({ count: 2, lastError: expect.stringMatching(/Idempotency-Key/) });
          expect((await send(app, 'bump', twin, { counter, id: loser }, { key: loser })).status).toBe(201);
        }
        expect((await db.query<{ value: number }>(`SELECT value FROM counters WHERE name = $1`, [counter]))[0].value).toBe(2);
      }
    });

    it('lets a nested QueryRunner transaction that met a serialization failure roll back as without the module; the next write is refused, and the request answers 503', async () => {
      for (const twin of TWINS) {
        const counter = uniqueLabel(`nested-${twin}`);
        const id = `${counter}:request`;
        await db.query(`INSERT INTO counters (name, value) VALUES ($1, 0)`, [counter]);
        const [answer] = await Promise.all([send(app, 'nested-after-conflict', twin, { counter, id }, { key: id }), updateBetween(db, id, counter)]);
        expect(met.get(id)).toMatchObject({ inner: 'could not serialize access due to concurrent update', innerRollback: 'rolled back' });
        if (twin === 'without') {
          expect(answer.status).toBe(201);
          expect(await countRows(db, 'faithful_rows', 'label LIKE $1', [`${id}:%`])).toBe(2);
        } else {
          expect([answer.status, answer.headers['retry-after'], met.get(id)?.after]).toEqual([503, '1', 'RequestTransactionConflictError']);
          expect(await countRows(db, 'faithful_rows', 'label LIKE $1', [`${id}:%`])).toBe(0);
          expect((await send(app, 'nested-after-conflict', twin, { counter, id }, { key: id })).status).toBe(201);
          expect(await countRows(db, 'faithful_rows', 'label LIKE $1', [`${id}:%`])).toBe(2);
        }
      }
    });

    // Without the module the client runs each statement on its own at READ COMMITTED, where this failure cannot happen: the module's answer is what its guide promises.
    it('answers 503 with Retry-After for a serialization failure on the request’s node-postgres client that the handler caught, and records nothing', async () => {
      const counter = uniqueLabel('raw-client');
      const id = `${counter}:request`;
      await db.query(`INSERT INTO counters (name, value) VALUES ($1, 0)`, [counter]);
      const [answer] = await Promise.all([send(app, 'raw-client-conflict', 'with', { counter, id }, { key: id }), updateBetween(db, id, counter)]);
      expect(met.get(id)?.caught).toBe('could not serialize access due to concurrent update');
      expect([answer.status, answer.headers['retry-after'], answer.body.type]).toEqual([503, '1', expect.stringContaining('transaction-conflict')]);
      expect(await countRows(db, 'faithful_rows', 'label = $1', [id])).toBe(0);
      expect((await send(app, 'raw-client-conflict', 'with', { counter, id }, { key: id })).status).toBe(201);
    });

    // Recorded, the give-up would replay for good, where the client's retry runs it afresh and goes through.
    it.each(['promise', 'config-callback', 'stream'] as const)('hears a serialization failure on the request’s client (%s) that a QueryRunner transaction rolled back: 503, nothing recorded, the runner unwound', async (form) => {
      for (const twin of TWINS) {
        const counter = uniqueLabel(`gives-up-${form}-${twin}`);
        const id = `${counter}:request`;
        await db.query(`INSERT INTO counters (name, value) VALUES ($1, 0)`, [counter]);
        const [answer] = await Promise.all([send(app, 'raw-client-gives-up', twin, { counter, id, form }, { key: id }), updateBetween(db, id, counter)]);
        if (twin === 'without') {
          expect([answer.status, answer.body]).toEqual([201, { gaveUp: false }]);
          continue;
        }
        expect([answer.status, answer.headers['retry-after']]).toEqual([503, '1']);
        expect(met.get(id)).toMatchObject({ rollback: 'rolled back', after: 'depth 0, active false' });
        expect(await db.query(`SELECT 1 FROM idempotency_records WHERE key = $1`, [id])).toHaveLength(0);
        expect(await send(app, 'raw-client-gives-up', twin, { counter, id, form }, { key: id })).toMatchObject({ status: 201, body: { gaveUp: false } });
      }
    });
  });
});
