import { ConflictException } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import {
  countRows,
  eventually,
  FAITHFUL_ROWS_SCHEMA,
  type FaithfulApp,
  FaithfulRow,
  type HandlerContext,
  lib,
  type PairedRoute,
  resetDatabaseDefault,
  send,
  setDatabaseDefault,
  startFaithfulApp,
  TimeoutInterceptor,
  type Twin,
  TWINS,
  uniqueLabel,
} from '../support/faithful-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

@Entity({ name: 'faithful_orders' })
class Order {
  @PrimaryGeneratedColumn()
  id: number;

  @Column('text')
  label: string;
}

/** A line of an order; no foreign key, so that a line committed without its order shows. */
@Entity({ name: 'faithful_order_lines' })
class OrderLine {
  @PrimaryGeneratedColumn()
  id: number;

  @Column('int', { name: 'order_id' })
  orderId: number;

  @Column('text')
  label: string;
}

/** What became of each write a handler made after its request may have ended, by name: `'written'` or the error it met. */
const lateWrites = new Map<string, unknown>();
const settle = async (name: string, write: Promise<unknown>) => {
  try {
    await write;
    lateWrites.set(name, 'written');
  } catch (error) {
    lateWrites.set(name, error);
    throw error;
  }
};
/** Executions of a handler, by label. */
const executions = new Map<string, number>();
/** Labels whose handler has got as far as the name says. */
const started = new Set<string>();
const finished = new Set<string>();

const insertRow = (dataSource: HandlerContext['dataSource'], label: string, step: string, execution: number | null = null) =>
  dataSource.query(`INSERT INTO faithful_rows (label, step, execution) VALUES ($1, $2, $3)`, [label, step, execution]);

/** A stock check and the order's writes at once: the check fails while the writes are halfway. */
async function placeOrder({ repository }: HandlerContext, { label }: { label: string }) {
  // The check fails 20 ms after the order was saved, however long the save took on a busy machine.
  let saved!: () => void;
  const orderSaved = new Promise<void>((resolve) => (saved = resolve));
  const check = async () => {
    await orderSaved;
    await sleep(20);
    throw new ConflictException('out of stock');
  };
  const write = async () => {
    const order = await repository(Order).save({ label });
    saved();
    await sleep(60);
    await settle(label, repository(OrderLine).save({ orderId: order.id, label }));
  };
  await Promise.all([check(), write()]);
  return { label };
}

/** Writes, calls a provider that is slow on the first execution only, writes again. */
async function writeAroundSlowCall({ dataSource }: HandlerContext, { label }: { label: string }) {
  const execution = (executions.get(label) ?? 0) + 1;
  executions.set(label, execution);
  await insertRow(dataSource, label, 'before', execution);
  if (execution === 1) await sleep(300);
  await settle(`${label}#${execution}`, insertRow(dataSource, label, 'after', execution));
  return { label, execution };
}

/** Writes first, then takes 800 ms. */
async function writeThenTakeLong({ dataSource }: HandlerContext, { label }: { label: string }) {
  await insertRow(dataSource, label, 'before');
  await sleep(800);
  finished.add(label);
  return { label };
}

/** Writes, waits 1.5 s for an external call, writes again. */
async function writeAroundExternalCall({ dataSource }: HandlerContext, { label }: { label: string }) {
  await insertRow(dataSource, label, 'before');
  await sleep(1500);
  await insertRow(dataSource, label, 'after');
  return { label };
}

/** Takes a second before its one write: its duplicates arrive while it holds the key. */
async function takeASecond({ dataSource }: HandlerContext, { label }: { label: string }) {
  started.add(label);
  await sleep(1000);
  await insertRow(dataSource, label, 'done');
  return { label };
}

/** Starts a transaction() and returns without awaiting it: it goes on after the handler returned. */
function leaveTransactionRunning({ dataSource }: HandlerContext, { label }: { label: string }) {
  void dataSource.transaction(async (manager) => {
    await sleep(50);
    await manager.query(`INSERT INTO faithful_rows (label, step) VALUES ($1, 'inside')`, [label]);
  });
  return { label };
}

/** Fails while a transaction() of the same Promise.all still runs. */
async function failBesideTransaction({ dataSource }: HandlerContext, { label }: { label: string }) {
  const fail = async () => {
    await sleep(10);
    throw new ConflictException('out of stock');
  };
  const write = () =>
    dataSource.transaction(async (manager) => {
      await manager.query(`INSERT INTO faithful_rows (label, step) VALUES ($1, 'inside')`, [label]);
      await sleep(100);
      await manager.query(`INSERT INTO faithful_rows (label, step) VALUES ($1, 'after')`, [label]);
    });
  await Promise.all([fail(), write()]);
  return { label };
}

/**
 * Items 2, 6 and 7 of issue 33: once an idempotent request has ended (its
 * Observable failed, an interceptor of the app answered, the server ended
 * its session), nothing of it commits, its client gets an answer, and a
 * retry runs it at most once more. Each route runs twice, with
 * `@Idempotent()` and without, through the packed ES build.
 */
describe('the end of an idempotent request', () => {
  let db: TestDatabase;
  const start = (routes: PairedRoute[], options: Partial<Parameters<typeof startFaithfulApp>[0]> = {}) =>
    startFaithfulApp({ db, routes, entities: [FaithfulRow, Order, OrderLine], ...options });
  const rows = (label: string, where = 'true', params: unknown[] = []) => countRows(db, 'faithful_rows', `label = $1 AND ${where}`, [label, ...params]);

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(`${FAITHFUL_ROWS_SCHEMA};
      CREATE TABLE faithful_orders (id serial PRIMARY KEY, label text NOT NULL);
      CREATE TABLE faithful_order_lines (id serial PRIMARY KEY, order_id int NOT NULL, label text NOT NULL)`);
  });
  afterAll(async () => {
    await db?.drop();
  });

  describe('nothing commits after the request has ended', () => {
    let app: FaithfulApp;
    beforeAll(async () => {
      app = await start([
        { path: 'orders', handle: placeOrder },
        { path: 'slow-call', handle: writeAroundSlowCall, inside: [new TimeoutInterceptor(100)] },
      ]);
    });
    afterAll(async () => {
      await app?.close();
    });

    it('commits no order line without its order when Promise.all fails halfway, and refuses the late write with TransactionClosedError', async () => {
      const labels = { with: uniqueLabel('order-with'), without: uniqueLabel('order-without') };
      const answers = await Promise.all(TWINS.map((twin) => send(app, 'orders', twin, { label: labels[twin] })));
      expect(answers.map((answer) => answer.status)).toEqual([409, 409]);
      expect(await eventually(() => lateWrites.has(labels.with) && lateWrites.has(labels.without), 1000), 'the late writes settled').toBe(true);
      const orphans = (label: string) =>
        countRows(db, 'faithful_order_lines l', 'l.label = $1 AND NOT EXISTS (SELECT 1 FROM faithful_orders o WHERE o.id = l.order_id)', [label]);
      // Without the module the order and its line each commit on their own: no orphan either.
      expect(await countRows(db, 'faithful_order_lines', 'label = $1', [labels.without])).toBe(1);
      expect(await orphans(labels.without)).toBe(0);
      expect(await orphans(labels.with)).toBe(0);
      expect(lateWrites.get(labels.with)).toBeInstanceOf(lib.TransactionClosedError);
    });

    it('answers 408 from a timeout() bound inside @Idempotent(), commits nothing of that attempt, and a retry with the same key writes each row once', async () => {
      const label = uniqueLabel('slow-call');
      const key = `${label}:key`;
      const first = await send(app, 'slow-call', 'with', { label }, { key });
      const without = await send(app, 'slow-call', 'without', { label: `${label}-without` });
      expect([first.status, without.status]).toEqual([408, 408]);
      // Sent at once, while the first attempt's handler still runs: it waits and runs (or replays), or gets 409.
      const retry = await send(app, 'slow-call', 'with', { label }, { key });
      expect([201, 408, 409]).toContain(retry.status);
      expect(await eventually(() => lateWrites.has(`${label}#1`), 2000), 'the first attempt’s late write settled').toBe(true);
      await sleep(1000);
      const again = await send(app, 'slow-call', 'with', { label }, { key });
      expect(again.status).toBe(201);
      // The late write either met a closed transaction or went into the attempt's transaction, which rolled back.
      const late = lateWrites.get(`${label}#1`);
      expect(late === 'written' || late instanceof lib.TransactionClosedError, `the late write: ${String(late)}`).toBe(true);
      expect(await rows(label, 'execution = 1')).toBe(0);
      expect(await rows(label, `step = 'before'`)).toBeLessThanOrEqual(1);
      expect(await rows(label, `step = 'after'`)).toBeLessThanOrEqual(1);
    });
  });

  describe('a transaction() still running when the handler settles', () => {
    let app: FaithfulApp;
    beforeAll(async () => {
      app = await start([
        { path: 'left-running', handle: leaveTransactionRunning },
        { path: 'fail-beside', handle: failBesideTransaction },
      ]);
    });
    afterAll(async () => {
      await app?.close();
    });

    it('is waited for, and commits with the request, where it had waited for good on the transaction it runs in', async () => {
      const labels = { with: uniqueLabel('left-running-with'), without: uniqueLabel('left-running-without') };
      const answers = await Promise.all(TWINS.map((twin) => send(app, 'left-running', twin, { label: labels[twin] }, { timeoutMs: 5000 })));
      expect(answers.map((answer) => answer.status)).toEqual([201, 201]);
      expect(await rows(labels.with)).toBe(1);
      expect(await eventually(async () => (await rows(labels.without)) === 1, 1000), 'the unawaited transaction committed without the module').toBe(true);
    });

    it('is waited for when Promise.all failed beside it, and rolls back with the request, which answers at once', async () => {
      const labels = { with: uniqueLabel('fail-beside-with'), without: uniqueLabel('fail-beside-without') };
      const answers = await Promise.all(TWINS.map((twin) => send(app, 'fail-beside', twin, { label: labels[twin] }, { timeoutMs: 5000 })));
      expect(answers.map((answer) => answer.status)).toEqual([409, 409]);
      expect(await rows(labels.with)).toBe(0);
      expect(await eventually(async () => (await rows(labels.without)) === 2, 1000), 'the transaction committed on its own without the module').toBe(true);
    });
  });

  describe('a global timeout interceptor around an idempotent route', () => {
    let app: FaithfulApp;
    beforeAll(async () => {
      app = await start([{ path: 'take-long', handle: writeThenTakeLong }], { configure: (nest) => nest.useGlobalInterceptors(new TimeoutInterceptor(300)) });
    });
    afterAll(async () => {
      await app?.close();
    });

    it('answers 408 to a handler that outlives it, as without the module, and commits none of its writes', async () => {
      const labels = { with: uniqueLabel('take-long-with'), without: uniqueLabel('take-long-without') };
      const answers = await Promise.all(TWINS.map((twin) => send(app, 'take-long', twin, { label: labels[twin] }, { timeoutMs: 2000 })));
      expect(answers.map((answer) => answer.status)).toEqual([408, 408]);
      expect(await eventually(() => finished.has(labels.with) && finished.has(labels.without), 1500), 'the handlers finished').toBe(true);
      expect(await rows(labels.with)).toBe(0);
    });
  });

  describe('server timeouts', () => {
    describe('a database whose idle_in_transaction_session_timeout is 1s', () => {
      let app: FaithfulApp;
      beforeAll(async () => {
        await setDatabaseDefault(db, 'idle_in_transaction_session_timeout', `'1s'`);
        app = await start([{ path: 'external-call', handle: writeAroundExternalCall }]);
      });
      afterAll(async () => {
        await app?.close();
        await resetDatabaseDefault(db, 'idle_in_transaction_session_timeout');
      });

      it('answers a handler that waits past it 503, in a problem whose detail names the setting', async () => {
        const labels = { with: uniqueLabel('external-with'), without: uniqueLabel('external-without') };
        const [withModule, without] = await Promise.all(TWINS.map((twin) => send(app, 'external-call', twin, { label: labels[twin] })));
        expect(without.status).toBe(201);
        expect(withModule.status).toBe(503);
        expect(withModule.headers['content-type']).toMatch(/^application\/problem\+json/);
        expect(withModule.body.detail).toContain('idle_in_transaction_session_timeout');
        expect(await rows(labels.with)).toBe(0);
      });
    });

    describe('a database whose statement_timeout is shorter than the route’s wait', () => {
      let app: FaithfulApp;
      beforeAll(async () => {
        await setDatabaseDefault(db, 'statement_timeout', `'300ms'`);
        app = await start([{ path: 'take-a-second', handle: takeASecond, idempotent: { wait: 2000 } }]);
      });
      afterAll(async () => {
        await app?.close();
        await resetDatabaseDefault(db, 'statement_timeout');
      });

      it('answers a duplicate sent while the first is in flight 409 with Retry-After or the replay, never 500', async () => {
        /** A request, and a duplicate with its key once the first one's handler runs. */
        const firstAndDuplicate = async (twin: Twin) => {
          const label = uniqueLabel(`take-a-second-${twin}`);
          const key = `${label}:key`;
          const first = send(app, 'take-a-second', twin, { label }, { key });
          expect(await eventually(() => started.has(label), 1000), 'the first request’s handler started').toBe(true);
          const duplicate = await send(app, 'take-a-second', twin, { label }, { key });
          return { label, first: await first, duplicate };
        };
        const [withModule, without] = await Promise.all(TWINS.map(firstAndDuplicate));
        // Without the module the duplicate runs the handler again: the database's timeout never bites the handler itself.
        expect([without.first.status, without.duplicate.status]).toEqual([201, 201]);
        expect(withModule.first.status).toBe(201);
        const { duplicate } = withModule;
        if (duplicate.status === 409) expect(duplicate.headers['retry-after']).toMatch(/^\d+$/);
        else expect([duplicate.status, duplicate.headers['idempotent-replayed']], duplicate.text).toEqual([201, 'true']);
        expect(await rows(withModule.label)).toBe(1);
      });
    });
  });
});
