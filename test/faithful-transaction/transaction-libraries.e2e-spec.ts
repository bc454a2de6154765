import * as cls from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { ConflictException } from '@nestjs/common';
import { getDataSourceToken } from '@nestjs/typeorm';
import { ClsModule } from 'nestjs-cls';
import { setTimeout as sleep } from 'node:timers/promises';
import { DataSource, EntityManager, Repository } from 'typeorm';
import * as typeormTransactional from 'typeorm-transactional';
import { countRows, eventually, FAITHFUL_ROWS_SCHEMA, type FaithfulApp, FaithfulRow, type HandlerContext, type PairedRoute, send, startFaithfulApp, type Twin, TWINS, uniqueLabel } from '../support/faithful-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

const { Propagation, runInTransaction, runOnTransactionCommit, runOnTransactionRollback, Transactional } = typeormTransactional;

// As the library's README asks: before any DataSource or repository exists. Its default storage, cls-hooked.
typeormTransactional.initializeTransactionalContext();
// In the typeorm-0.3 project its require('typeorm') is sent to 0.3 (test/support/typeorm-0.3.setup.ts): else it would patch another TypeORM than the app's.
if (!Object.getOwnPropertyDescriptor(Repository.prototype, 'manager')?.get) throw new Error('typeorm-transactional patched another TypeORM than this suite’s');

/** typeorm-transactional's hooks fired, by label, each with whether the label's order row was visible from another connection then. */
const hooksFired = new Map<string, Array<{ hook: string; visible: boolean }>>();
let ordersVisible: (label: string) => Promise<boolean>;

/** Records a hook once it has checked what other connections see. */
function record(label: string, hook: string): void {
  void ordersVisible(label).then((visible) => hooksFired.set(label, [...(hooksFired.get(label) ?? []), { hook, visible }]));
}

/** Orders and their audit, written as an app on typeorm-transactional writes them: through a repository, in `@Transactional()` methods. */
class Ledger {
  constructor(private readonly rows: Repository<FaithfulRow>) {}

  @Transactional()
  async place(label: string): Promise<void> {
    await this.rows.save({ label, step: 'order' });
    runOnTransactionCommit(() => record(label, 'commit'));
    runOnTransactionRollback(() => record(label, 'rollback'));
  }

  /** Writes its order, then fails: its own transaction rolls back, whatever its caller does with the error. */
  @Transactional()
  async placeThenFail(label: string): Promise<never> {
    await this.rows.save({ label, step: 'order' });
    throw new ConflictException('the order fails after its write');
  }

  /** Writes its order and its hooks, then fails: its transaction rolls back, and so its rollback hook fires, never its commit hook. */
  @Transactional()
  async placeWithHooksThenFail(label: string): Promise<never> {
    await this.place(label);
    throw new ConflictException('the order fails after its write and its hooks');
  }

  /** The order fails after its audit: the audit must outlive it. */
  @Transactional()
  async placeAuditedThenFail(label: string): Promise<never> {
    await this.rows.save({ label, step: 'order' });
    await this.audit(label);
    throw new Error('the order fails after its audit');
  }

  @Transactional({ propagation: Propagation.REQUIRES_NEW })
  async audit(label: string): Promise<void> {
    await this.rows.save({ label, step: 'audit' });
    runOnTransactionCommit(() => record(label, 'audit committed'));
  }
}

const ledgerOf = ({ repository }: HandlerContext) => new Ledger(repository(FaithfulRow));

const TYPEORM_TRANSACTIONAL_ROUTES: PairedRoute[] = [
  {
    path: 'tt/place',
    handle: async (context, { label }: { label: string }) => {
      await ledgerOf(context).place(label);
      return { label };
    },
  },
  {
    path: 'tt/place-then-fail',
    handle: async (context, { label }: { label: string }) => {
      await ledgerOf(context).place(label);
      throw new Error('the request fails after its order');
    },
  },
  {
    path: 'tt/place-then-conflict',
    idempotent: { storeErrors: [409] },
    handle: async (context, { label }: { label: string }) => {
      await ledgerOf(context).place(label);
      throw new ConflictException('the order conflicts');
    },
  },
  {
    path: 'tt/own-paths-then-fail',
    handle: async (context, { label }: { label: string }) => {
      await ledgerOf(context).place(label);
      await context.get(EntityManager).save(FaithfulRow, { label, step: 'injected' });
      await context.dataSource.transaction((manager) => manager.save(FaithfulRow, { label, step: 'transaction' }));
      throw new Error('the request fails after its writes');
    },
  },
  {
    path: 'tt/caught-then-place',
    handle: async (context, { label }: { label: string }) => {
      const ledger = ledgerOf(context);
      await ledger.placeWithHooksThenFail(`${label}-failed`).catch(() => undefined);
      await ledger.place(label);
      return { label };
    },
  },
  {
    path: 'tt/caught',
    handle: async (context, { label }: { label: string }) => {
      await ledgerOf(context)
        .placeThenFail(label)
        .catch(() => undefined);
      return { label };
    },
  },
  { path: 'tt/audited-then-fail', handle: (context, { label }: { label: string }) => ledgerOf(context).placeAuditedThenFail(label) },
  {
    path: 'tt/run-in-new-transaction',
    handle: async ({ repository }, { label }: { label: string }) => {
      await runInTransaction(() => repository(FaithfulRow).save({ label, step: 'audit' }), { propagation: Propagation.REQUIRES_NEW });
      throw new Error('the request fails after its audit');
    },
  },
];

/** The same, on @nestjs-cls/transactional: writes through its TransactionHost's `tx`. */
class ClsLedger {
  constructor(private readonly host: cls.TransactionHost<TransactionalAdapterTypeOrm>) {}

  /** Answers the isolation level it ran at. */
  @cls.Transactional()
  async place(label: string): Promise<{ isolation: string }> {
    await this.host.tx.getRepository(FaithfulRow).save({ label, step: 'order' });
    const [{ transaction_isolation }] = await this.host.tx.query(`SHOW transaction_isolation`);
    return { isolation: transaction_isolation };
  }

  @cls.Transactional()
  async placeAuditedThenFail(label: string): Promise<never> {
    await this.host.tx.getRepository(FaithfulRow).save({ label, step: 'order' });
    await this.audit(label);
    throw new Error('the order fails after its audit');
  }

  @cls.Transactional(cls.Propagation.RequiresNew)
  async audit(label: string): Promise<void> {
    await this.host.tx.getRepository(FaithfulRow).save({ label, step: 'audit' });
  }
}

const clsHostOf = ({ get }: HandlerContext) => get<cls.TransactionHost<TransactionalAdapterTypeOrm>>(cls.TransactionHost);

const NESTJS_CLS_ROUTES: PairedRoute[] = [
  { path: 'cls/place', handle: (context, { label }: { label: string }) => new ClsLedger(clsHostOf(context)).place(label) },
  { path: 'cls/audited-then-fail', handle: (context, { label }: { label: string }) => new ClsLedger(clsHostOf(context)).placeAuditedThenFail(label) },
  {
    path: 'cls/with-new-transaction',
    handle: async (context, { label }: { label: string }) => {
      const host = clsHostOf(context);
      await host.withTransaction(cls.Propagation.RequiresNew, () => host.tx.getRepository(FaithfulRow).save({ label, step: 'audit' }));
      throw new Error('the request fails after its audit');
    },
  },
];

/** nestjs-cls with the transactional plugin on the app's DataSource, its adapter's default options `defaultTxOptions`. */
const clsModule = (defaultTxOptions?: { isolationLevel: 'SERIALIZABLE' }) =>
  ClsModule.forRoot({
    global: true,
    plugins: [new cls.ClsPluginTransactional({ adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: getDataSourceToken(), defaultTxOptions }) })],
  });

/**
 * Item 8 of issue 33 ("REQUIRES_NEW quietly joins") and item 3's hooks of
 * typeorm-transactional: inside an idempotent request, an app's
 * transaction library keeps its word. REQUIRED joins the request's
 * transaction and commits or rolls back with it; REQUIRES_NEW is a
 * transaction of its own on another connection, which outlives the
 * request's failure as it would without the module; typeorm-transactional's
 * hooks fire once, at the request's real end. Each route runs twice, with
 * `@Idempotent()` and without, through the packed ES build.
 */
describe('the app’s transaction library inside an idempotent request', () => {
  let db: TestDatabase;
  const rows = (label: string, step: string) => countRows(db, 'faithful_rows', 'label = $1 AND step = $2', [label, step]);
  const labelsOf = (name: string): Record<Twin, string> => ({ with: uniqueLabel(`${name}-with`), without: uniqueLabel(`${name}-without`) });
  const bothTwins = (app: FaithfulApp, path: string, labels: Record<Twin, string>) => Promise.all(TWINS.map((twin) => send(app, path, twin, { label: labels[twin] })));

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(FAITHFUL_ROWS_SCHEMA);
    ordersVisible = async (label) => (await rows(label, 'order')) > 0;
  });
  afterAll(async () => {
    await db?.drop();
  });

  describe('typeorm-transactional', () => {
    let app: FaithfulApp;
    const fired = (label: string, hook: string) => (hooksFired.get(label) ?? []).filter((entry) => entry.hook === hook);

    beforeAll(async () => {
      app = await startFaithfulApp({
        db,
        routes: TYPEORM_TRANSACTIONAL_ROUTES,
        dataSourceFactory: async (options) => typeormTransactional.addTransactionalDataSource(new DataSource(options)),
      });
    });
    afterAll(async () => {
      await app?.close();
      typeormTransactional.deleteDataSourceByName('default');
    });

    it('commits a REQUIRES_NEW audit of its own that outlives the failure of the transaction around it, as without the module', async () => {
      const labels = labelsOf('tt-audited');
      expect((await bothTwins(app, 'tt/audited-then-fail', labels)).map((answer) => answer.status)).toEqual([500, 500]);
      for (const twin of TWINS) {
        expect([await rows(labels[twin], 'audit'), await rows(labels[twin], 'order')], twin).toEqual([1, 0]);
        expect(await eventually(() => fired(labels[twin], 'audit committed').length === 1), `${twin}: the audit’s commit hook fired`).toBe(true);
      }
    });

    it('rolls back the writes of a REQUIRED method that failed, though the handler caught its error and answered 201, as without the module', async () => {
      const labels = labelsOf('tt-caught');
      expect((await bothTwins(app, 'tt/caught', labels)).map((answer) => answer.status)).toEqual([201, 201]);
      expect([await rows(labels.with, 'order'), await rows(labels.without, 'order')]).toEqual([0, 0]);
    });

    it('fires the rollback hook of a REQUIRED method that failed under a handler that caught its error and went on, never its commit hook, as without the module', async () => {
      const labels = labelsOf('tt-caught-hooks');
      expect((await bothTwins(app, 'tt/caught-then-place', labels)).map((answer) => answer.status)).toEqual([201, 201]);
      for (const twin of TWINS) {
        const failed = `${labels[twin]}-failed`;
        expect(await eventually(() => fired(failed, 'rollback').length === 1), `${twin}: the failed method’s rollback hook fired`).toBe(true);
        expect(await eventually(() => fired(labels[twin], 'commit').length === 1), `${twin}: the next method’s commit hook fired`).toBe(true);
      }
      await sleep(100);
      for (const twin of TWINS) {
        const failed = `${labels[twin]}-failed`;
        expect([fired(failed, 'commit'), fired(failed, 'rollback').length, fired(labels[twin], 'rollback')], twin).toEqual([[], 1, []]);
        expect(fired(labels[twin], 'commit').every((entry) => entry.visible), `${twin}: the order was committed when its hook fired`).toBe(true);
        expect([await rows(failed, 'order'), await rows(labels[twin], 'order')], twin).toEqual([0, 1]);
      }
    });

    it('commits an audit of runInTransaction(…, { propagation: REQUIRES_NEW }) that outlives the request’s failure', async () => {
      const labels = labelsOf('tt-run-in');
      expect((await bothTwins(app, 'tt/run-in-new-transaction', labels)).map((answer) => answer.status)).toEqual([500, 500]);
      expect([await rows(labels.with, 'audit'), await rows(labels.without, 'audit')]).toEqual([1, 1]);
    });

    it('fires the rollback hook, never the commit hook, for a REQUIRED write rolled back under a failure the route records', async () => {
      const labels = labelsOf('tt-stored-conflict');
      expect((await bothTwins(app, 'tt/place-then-conflict', labels)).map((answer) => answer.status)).toEqual([409, 409]);
      expect(await eventually(() => fired(labels.with, 'rollback').length === 1), 'the rollback hook fired').toBe(true);
      await sleep(100);
      expect(fired(labels.with, 'commit')).toEqual([]);
      expect(await rows(labels.with, 'order')).toBe(0);
    });

    it('rolls the app’s other writes back with the request too: the injected EntityManager and dataSource.transaction() join it, beside the library’s', async () => {
      const labels = labelsOf('tt-own-paths');
      expect((await bothTwins(app, 'tt/own-paths-then-fail', labels)).map((answer) => answer.status)).toEqual([500, 500]);
      const all = (label: string) => countRows(db, 'faithful_rows', 'label = $1', [label]);
      // Without the module each of the three writes committed on its own.
      expect([await all(labels.with), await all(labels.without)]).toEqual([0, 3]);
    });

    it('commits a REQUIRED write with the request, and fires its commit hook once, after the request’s COMMIT', async () => {
      const labels = labelsOf('tt-place');
      expect((await bothTwins(app, 'tt/place', labels)).map((answer) => answer.status)).toEqual([201, 201]);
      for (const twin of TWINS) {
        expect(await eventually(() => fired(labels[twin], 'commit').length > 0), `${twin}: the commit hook fired`).toBe(true);
        expect(fired(labels[twin], 'commit').every((entry) => entry.visible), `${twin}: the order was committed when it fired`).toBe(true);
      }
      await sleep(100);
      expect(fired(labels.with, 'commit')).toHaveLength(1);
      expect(fired(labels.with, 'rollback')).toEqual([]);
    });

    it('rolls a REQUIRED write back with a request that answered 500, and fires its rollback hook, never its commit hook', async () => {
      const labels = labelsOf('tt-place-then-fail');
      expect((await bothTwins(app, 'tt/place-then-fail', labels)).map((answer) => answer.status)).toEqual([500, 500]);
      // Without the module the order's own transaction committed before the request failed: its row and its commit hook stay.
      expect(await eventually(() => fired(labels.without, 'commit').length === 1)).toBe(true);
      expect(await eventually(() => fired(labels.with, 'rollback').length === 1), 'the rollback hook fired').toBe(true);
      await sleep(100);
      expect(fired(labels.with, 'commit')).toEqual([]);
      expect(fired(labels.with, 'rollback')).toHaveLength(1);
      expect([await rows(labels.with, 'order'), await rows(labels.without, 'order')]).toEqual([0, 1]);
    });
  });

  describe('@nestjs-cls/transactional', () => {
    let app: FaithfulApp;
    beforeAll(async () => {
      app = await startFaithfulApp({ db, routes: NESTJS_CLS_ROUTES, imports: [clsModule()] });
    });
    afterAll(async () => {
      await app?.close();
    });

    it('commits a RequiresNew audit of its own that outlives the failure of the transaction around it, as without the module', async () => {
      const labels = labelsOf('cls-audited');
      expect((await bothTwins(app, 'cls/audited-then-fail', labels)).map((answer) => answer.status)).toEqual([500, 500]);
      for (const twin of TWINS) expect([await rows(labels[twin], 'audit'), await rows(labels[twin], 'order')], twin).toEqual([1, 0]);
    });

    it('commits an audit of withTransaction(Propagation.RequiresNew, …) that outlives the request’s failure', async () => {
      const labels = labelsOf('cls-with-new');
      expect((await bothTwins(app, 'cls/with-new-transaction', labels)).map((answer) => answer.status)).toEqual([500, 500]);
      expect([await rows(labels.with, 'audit'), await rows(labels.without, 'audit')]).toEqual([1, 1]);
    });

    it('commits a Required write with the request', async () => {
      const labels = labelsOf('cls-place');
      expect((await bothTwins(app, 'cls/place', labels)).map((answer) => answer.status)).toEqual([201, 201]);
      expect([await rows(labels.with, 'order'), await rows(labels.without, 'order')]).toEqual([1, 1]);
    });
  });

  describe('@nestjs-cls/transactional with defaultTxOptions: { isolationLevel: SERIALIZABLE }', () => {
    let app: FaithfulApp;
    beforeAll(async () => {
      app = await startFaithfulApp({ db, routes: NESTJS_CLS_ROUTES, imports: [clsModule({ isolationLevel: 'SERIALIZABLE' })] });
    });
    afterAll(async () => {
      await app?.close();
    });

    it('answers as without the module, its Required transaction at SERIALIZABLE', async () => {
      const labels = labelsOf('cls-serializable');
      const [withModule, without] = await bothTwins(app, 'cls/place', labels);
      expect([without.status, without.body]).toEqual([201, { isolation: 'serializable' }]);
      expect([withModule.status, withModule.body]).toEqual([without.status, without.body]);
    });
  });
});
