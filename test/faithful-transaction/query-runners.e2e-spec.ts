import { ServiceUnavailableException } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import { countRows, FAITHFUL_ROWS_SCHEMA, type FaithfulApp, FaithfulRow, type HandlerContext, type PairedRoute, send, startFaithfulApp, type Twin, TWINS, uniqueLabel } from '../support/faithful-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

/**
 * docs.nestjs.com/techniques/database, "Transactions": the QueryRunner
 * example as printed there, its users rows of this suite's table.
 */
async function createMany(dataSource: DataSource, users: FaithfulRow[]) {
  const queryRunner = dataSource.createQueryRunner();

  await queryRunner.connect();
  await queryRunner.startTransaction();
  try {
    await queryRunner.manager.save(users[0]);
    await queryRunner.manager.save(users[1]);

    await queryRunner.commitTransaction();
  } catch (err) {
    // since we have errors lets rollback the changes we made
    await queryRunner.rollbackTransaction();
  } finally {
    // you need to release a queryRunner which was manually instantiated
    await queryRunner.release();
  }
}

const row = (label: string, step: string) => Object.assign(new FaithfulRow(), { label, step });

/** Executions of a handler, by label. */
const executions = new Map<string, number>();
const execution = (label: string) => {
  const count = (executions.get(label) ?? 0) + 1;
  executions.set(label, count);
  return count;
};

/** The textbook transaction, then a downstream call that times out on the first execution only. */
async function orderThenDownstream({ dataSource }: HandlerContext, { label }: { label: string }) {
  await createMany(dataSource, [row(label, 'order'), row(label, 'line')]);
  if (execution(label) === 1) throw new ServiceUnavailableException('the downstream service timed out');
  return { label };
}

/** A write through the repository, then a QueryRunner that reads and updates the row it wrote. */
async function seeWhatTheRequestWrote({ dataSource, repository }: HandlerContext, { label }: { label: string }) {
  await repository(FaithfulRow).save({ label, step: 'saved' });
  const queryRunner = dataSource.createQueryRunner();
  await queryRunner.connect();
  try {
    const [{ seen }] = await queryRunner.query(`SELECT count(*)::int AS seen FROM faithful_rows WHERE label = $1`, [label]);
    await queryRunner.startTransaction();
    const [, updated] = await queryRunner.query(`UPDATE faithful_rows SET step = 'updated' WHERE label = $1`, [label]);
    await queryRunner.commitTransaction();
    return { seen, updated };
  } finally {
    await queryRunner.release();
  }
}

/** Changes a row through the repository, then again in a QueryRunner's transaction: the second waits for the first's lock if it is held. */
async function changeTwice({ dataSource, repository }: HandlerContext, { label }: { label: string }) {
  await repository(FaithfulRow).update({ label }, { step: 'by the repository' });
  const queryRunner = dataSource.createQueryRunner();
  await queryRunner.connect();
  await queryRunner.startTransaction();
  try {
    await queryRunner.manager.update(FaithfulRow, { label }, { step: 'by the query runner' });
    await queryRunner.commitTransaction();
  } catch (error) {
    await queryRunner.rollbackTransaction();
    throw error;
  } finally {
    await queryRunner.release();
  }
  return { label };
}

/** A QueryRunner transaction rolled back, its error caught: nothing of it stays. */
async function rollBackAndGoOn({ dataSource }: HandlerContext, { label }: { label: string }) {
  const queryRunner = dataSource.createQueryRunner();
  await queryRunner.connect();
  await queryRunner.startTransaction();
  await queryRunner.manager.save(row(label, 'rolled back'));
  await queryRunner.rollbackTransaction();
  await queryRunner.release();
  await dataSource.query(`INSERT INTO faithful_rows (label, step) VALUES ($1, 'after')`, [label]);
  return { label };
}

/** A manager of `createEntityManager()`'s, which has no QueryRunner: TypeORM creates one per operation. */
async function entityManagerOfItsOwn({ dataSource }: HandlerContext, { label }: { label: string }) {
  await dataSource.createEntityManager().insert(FaithfulRow, { label, step: 'own manager' });
  throw new Error('failed after the insert');
}

/** A QueryRunner that is never released, nor its transaction started. */
async function neverReleased({ dataSource }: HandlerContext, { label }: { label: string }) {
  const queryRunner = dataSource.createQueryRunner();
  await queryRunner.connect();
  await queryRunner.manager.save(row(label, 'unreleased'));
  return { label };
}

/** Asks for SERIALIZABLE on a QueryRunner of its own. */
async function startSerializable({ dataSource }: HandlerContext) {
  const queryRunner = dataSource.createQueryRunner();
  try {
    await queryRunner.startTransaction('SERIALIZABLE');
    await queryRunner.commitTransaction();
    return { started: true };
  } catch (error) {
    return { refused: (error as Error).message };
  } finally {
    await queryRunner.release();
  }
}

/** A QueryRunner transaction that rolls back after the repository wrote meanwhile; the handler goes on. */
async function writeBesideRollback({ dataSource, repository }: HandlerContext, { label }: { label: string }) {
  const queryRunner = dataSource.createQueryRunner();
  await queryRunner.startTransaction();
  await queryRunner.manager.save(row(label, 'in the query runner'));
  await repository(FaithfulRow).save({ label, step: 'beside it' });
  await queryRunner.rollbackTransaction();
  await queryRunner.release();
  return { label };
}

/** Changes a row, then awaits a change of the same row on a connection of its own. */
async function waitOnItsOwnLock({ dataSource, repository, tx }: HandlerContext, { label }: { label: string }) {
  await repository(FaithfulRow).update({ label }, { step: 'by the request' });
  try {
    await tx.outside(() => dataSource.query(`UPDATE faithful_rows SET step = 'outside' WHERE label = $1`, [label]));
    return { outside: 'written' };
  } catch (error) {
    return { outside: (error as Error).name, message: (error as Error).message };
  }
}

/** Reads a stream of rows, and writes an audit row every 500 rows read. */
async function auditWhileStreaming({ repository }: HandlerContext, { label, source }: { label: string; source: string }) {
  const stream = await repository(FaithfulRow).createQueryBuilder('r').where('r.label = :source', { source }).orderBy('r.id').stream();
  let read = 0;
  for await (const _ of stream) {
    if (read++ % 500 === 0) await repository(FaithfulRow).insert({ label, step: 'audit' });
  }
  return { read };
}

/** Stops reading a stream at its first row, then writes. */
async function stopStreamingThenWrite({ dataSource }: HandlerContext, { label, source }: { label: string; source: string }) {
  const queryRunner = dataSource.createQueryRunner();
  await queryRunner.connect();
  try {
    const stream = await queryRunner.stream(`SELECT id FROM faithful_rows WHERE label = $1 ORDER BY id`, [source]);
    let first: unknown;
    for await (const found of stream) {
      first = found;
      break;
    }
    await queryRunner.query(`INSERT INTO faithful_rows (label, step) VALUES ($1, 'after the stream')`, [label]);
    return { first: first !== undefined };
  } finally {
    await queryRunner.release();
  }
}

/**
 * Items 1 and 3 of issue 40: a QueryRunner the handler creates, the
 * transaction NestJS's documentation teaches, is the request's, and a
 * stream read while the handler writes never hangs. Each route runs twice,
 * with `@Idempotent()` and without, through the packed ES build.
 */
describe('QueryRunners and streams of the handler’s own', () => {
  let db: TestDatabase;
  let app: FaithfulApp;
  const rows = (label: string, where = 'true') => countRows(db, 'faithful_rows', `label = $1 AND ${where}`, [label]);
  const labels = (name: string): Record<Twin, string> => ({ with: uniqueLabel(`${name}-with`), without: uniqueLabel(`${name}-without`) });

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(FAITHFUL_ROWS_SCHEMA);
    const routes: PairedRoute[] = [
      { path: 'order', handle: orderThenDownstream },
      { path: 'see', handle: seeWhatTheRequestWrote },
      { path: 'change-twice', handle: changeTwice },
      { path: 'roll-back', handle: rollBackAndGoOn },
      { path: 'never-released', handle: neverReleased },
      { path: 'own-manager', handle: entityManagerOfItsOwn },
      { path: 'serializable', handle: startSerializable },
      { path: 'beside-rollback', handle: writeBesideRollback },
      { path: 'own-lock', handle: waitOnItsOwnLock },
      { path: 'audit-stream', handle: auditWhileStreaming },
      { path: 'stop-stream', handle: stopStreamingThenWrite },
    ];
    app = await startFaithfulApp({ db, routes });
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  describe('the QueryRunner transaction of NestJS’s documentation', () => {
    it('keeps nothing of a request that fails after its commitTransaction(), and its retry places one order, not two', async () => {
      const label = labels('order');
      const first = await Promise.all(TWINS.map((twin) => send(app, 'order', twin, { label: label[twin] }, { key: `${label[twin]}:key` })));
      expect(first.map((answer) => answer.status)).toEqual([503, 503]);
      // Without the module its commit kept the rows of the failed request.
      expect([await rows(label.with), await rows(label.without)]).toEqual([0, 2]);
      const retry = await Promise.all(TWINS.map((twin) => send(app, 'order', twin, { label: label[twin] }, { key: `${label[twin]}:key` })));
      expect(retry.map((answer) => answer.status)).toEqual([201, 201]);
      expect([await rows(label.with), await rows(label.without)]).toEqual([2, 4]);
      const replay = await send(app, 'order', 'with', { label: label.with }, { key: `${label.with}:key` });
      expect([replay.status, replay.headers['idempotent-replayed']]).toEqual([201, 'true']);
      expect(await rows(label.with)).toBe(2);
    });

    it('sees, counts and updates what the request wrote before, as it would once that had committed', async () => {
      const label = labels('see');
      const answers = await Promise.all(TWINS.map((twin) => send(app, 'see', twin, { label: label[twin] })));
      expect(answers.map((answer) => [answer.status, answer.body])).toEqual([
        [201, { seen: 1, updated: 1 }],
        [201, { seen: 1, updated: 1 }],
      ]);
      expect(await rows(label.with, `step = 'updated'`)).toBe(1);
    });

    it('changes a row the request changed before without waiting on the request’s own lock', async () => {
      const label = labels('change-twice');
      for (const twin of TWINS) await db.query(`INSERT INTO faithful_rows (label, step) VALUES ($1, 'seeded')`, [label[twin]]);
      const answers = await Promise.all(TWINS.map((twin) => send(app, 'change-twice', twin, { label: label[twin] }, { timeoutMs: 5000 })));
      expect(answers.map((answer) => answer.status)).toEqual([201, 201]);
      expect(await rows(label.with, `step = 'by the query runner'`)).toBe(1);
    });

    it('undoes what its rollbackTransaction() rolls back, and keeps what the handler writes after', async () => {
      const label = labels('roll-back');
      const answers = await Promise.all(TWINS.map((twin) => send(app, 'roll-back', twin, { label: label[twin] })));
      expect(answers.map((answer) => answer.status)).toEqual([201, 201]);
      for (const twin of TWINS) expect(await rows(label[twin], `step = 'rolled back'`)).toBe(0);
      for (const twin of TWINS) expect(await rows(label[twin], `step = 'after'`)).toBe(1);
    });

    it('joins a manager of createEntityManager(), which creates a QueryRunner per operation: a failure keeps nothing', async () => {
      const label = labels('own-manager');
      const answers = await Promise.all(TWINS.map((twin) => send(app, 'own-manager', twin, { label: label[twin] })));
      expect(answers.map((answer) => answer.status)).toEqual([500, 500]);
      expect([await rows(label.with), await rows(label.without)]).toEqual([0, 1]);
    });

    it('takes no pool connection for a QueryRunner the handler never releases', async () => {
      // Without the module each one holds a connection for good: the pool of ten would run dry.
      const label = uniqueLabel('never-released');
      const answers = await Promise.all(Array.from({ length: 12 }, (_, n) => send(app, 'never-released', 'with', { label }, { key: `${label}:${n}`, timeoutMs: 5000 })));
      expect(answers.map((answer) => answer.status)).toEqual(Array(12).fill(201));
      expect(await rows(label)).toBe(12);
    });

    it('refuses startTransaction() at a level above the request’s, naming the route option that gives it', async () => {
      const [withModule, without] = await Promise.all(TWINS.map((twin) => send(app, 'serializable', twin)));
      expect(without.body).toEqual({ started: true });
      expect(withModule.body.refused).toContain(`@Idempotent({ isolation: 'SERIALIZABLE' })`);
      expect(withModule.body.refused).toContain(`queryRunner.startTransaction('SERIALIZABLE')`);
    });

    it('rolls the request back, rather than commit without them, when its rollback took writes of other paths with it', async () => {
      const label = labels('beside-rollback');
      const [withModule, without] = await Promise.all(TWINS.map((twin) => send(app, 'beside-rollback', twin, { label: label[twin] })));
      // Without the module the repository's write committed on a connection of its own.
      expect([without.status, await rows(label.without)]).toEqual([201, 1]);
      expect([withModule.status, await rows(label.with)]).toEqual([500, 0]);
    });
  });

  it('cancels, rather than wait for good, a statement outside the request that waits on a lock the request holds, and says what waited on what', async () => {
    const label = labels('own-lock');
    for (const twin of TWINS) await db.query(`INSERT INTO faithful_rows (label, step) VALUES ($1, 'seeded')`, [label[twin]]);
    const [withModule, without] = await Promise.all(TWINS.map((twin) => send(app, 'own-lock', twin, { label: label[twin] }, { timeoutMs: 10_000 })));
    // Without the module the request's change committed at once, and the other connection found the row free.
    expect([without.status, without.body]).toEqual([201, { outside: 'written' }]);
    expect([withModule.status, withModule.body.outside]).toEqual([201, 'LockHeldByRequestError']);
    expect(withModule.body.message).toContain('IdempotencyTransactionHost.outside()');
    expect(await rows(label.with, `step = 'by the request'`)).toBe(1);
  });

  describe('streams', () => {
    const source = uniqueLabel('stream-source');
    beforeAll(async () => {
      await db.query(`INSERT INTO faithful_rows (label, step) SELECT $1, 'source' FROM generate_series(1, 2000)`, [source]);
    });

    it('writes between the rows of a stream it reads, as without the module', async () => {
      const label = labels('audit-stream');
      const answers = await Promise.all(TWINS.map((twin) => send(app, 'audit-stream', twin, { label: label[twin], source }, { timeoutMs: 15_000 })));
      expect(answers.map((answer) => [answer.status, answer.body])).toEqual([
        [201, { read: 2000 }],
        [201, { read: 2000 }],
      ]);
      for (const twin of TWINS) expect(await rows(label[twin], `step = 'audit'`)).toBe(4);
    });

    it('writes after leaving a stream at its first row', async () => {
      const label = labels('stop-stream');
      const answers = await Promise.all(TWINS.map((twin) => send(app, 'stop-stream', twin, { label: label[twin], source }, { timeoutMs: 5000 })));
      expect(answers.map((answer) => [answer.status, answer.body])).toEqual([
        [201, { first: true }],
        [201, { first: true }],
      ]);
      for (const twin of TWINS) expect(await rows(label[twin], `step = 'after the stream'`)).toBe(1);
    });
  });
});
