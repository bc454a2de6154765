import { AsyncLocalStorage } from 'node:async_hooks';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { DataSource, type EntityManager, type QueryRunner } from 'typeorm';
import {
  addTransactionalDataSource,
  deleteDataSourceByName,
  initializeTransactionalContext,
  Propagation,
  runOnTransactionCommit,
  runOnTransactionRollback,
  StorageDriver,
  Transactional,
} from 'typeorm-transactional';
import type { RequestTransaction, TransactionEnd } from '../request-transaction.js';
import type { LibraryJoin, Outside } from './library-join.js';
import { TRANSACTIONAL_DATA_SOURCE } from './transaction-libraries.js';
import { joinTypeormTransactional } from './typeorm-transactional.js';

// The end-to-end suite runs the library's default storage (cls-hooked); this one, the AsyncLocalStorage its README recommends.
initializeTransactionalContext({ storageDriver: StorageDriver.ASYNC_LOCAL_STORAGE });

const hooks: string[] = [];

/** Each method answers the EntityManager it ran on, as the library hands it to repositories. */
class Service {
  constructor(private readonly dataSource: DataSource) {}

  @Transactional({ connectionName: 'contract' })
  async required(): Promise<EntityManager> {
    runOnTransactionCommit(() => hooks.push('commit'));
    runOnTransactionRollback((error) => hooks.push(`rollback: ${error.message}`));
    return this.dataSource.manager;
  }

  @Transactional({ connectionName: 'contract' })
  async requiredThenFail(): Promise<never> {
    await this.required();
    throw new Error('the method failed');
  }

  @Transactional({ connectionName: 'contract' })
  async requiredWithOwnTransaction(): Promise<unknown> {
    return this.dataSource.transaction(async () => undefined);
  }

  @Transactional({ connectionName: 'contract', propagation: Propagation.REQUIRES_NEW })
  async requiresNew(): Promise<EntityManager> {
    return this.dataSource.manager;
  }

  @Transactional({ connectionName: 'contract', propagation: Propagation.NESTED })
  async nested(): Promise<EntityManager> {
    return this.dataSource.manager;
  }
}

/**
 * What `joinTypeormTransactional` relies on in typeorm-transactional
 * (typeorm-transactional.ts): `addTransactionalDataSource()` names the
 * DataSource; `runInTransaction()` with REQUIRED asks `dataSource.transaction()`
 * for its transaction, hands the callback's manager to repositories, and
 * fires its hooks once that call settles; REQUIRED inside runs inline, and
 * REQUIRES_NEW and NESTED ask `dataSource.transaction()` again, under a hook
 * emitter of their own (`getHookInContext()`). These fail loudly when a
 * release changes them; the module would otherwise let REQUIRES_NEW join the
 * request, or fire hooks before its COMMIT.
 */
describe('joining typeorm-transactional (contract with typeorm-transactional)', () => {
  let dataSource: DataSource;
  let join: LibraryJoin;
  let runner: QueryRunner;
  let ends: TransactionEnd[];
  /** How many transactions the join ran outside the request. */
  let outsideCalls = 0;
  /** How many units of the request's transaction the library's calls ran as. */
  let units = 0;
  const outside: Outside = (work) => {
    outsideCalls++;
    return work();
  };
  /** Set inside a unit of the request's transaction. */
  const inUnit = new AsyncLocalStorage<true>();
  /** The request's transaction, as the flow gives it: its end is told through `hookInto`; a unit's calls join it. */
  const request = () =>
    ({
      hookInto: (end: TransactionEnd) => ends.push(end),
      unit: (work: () => Promise<unknown>) => {
        units++;
        return inUnit.run(true, work);
      },
      get inUnit() {
        return inUnit.getStore() === true;
      },
    }) as unknown as RequestTransaction;

  beforeAll(async () => {
    dataSource = addTransactionalDataSource({ name: 'contract', dataSource: new DataSource({ type: 'postgres', url: process.env.DATABASE_URL, extra: { max: 3 } }) });
    await dataSource.initialize();
    join = (await joinTypeormTransactional(dataSource, 'contract', outside))!;
  });
  beforeEach(async () => {
    hooks.length = 0;
    ends = [];
    outsideCalls = 0;
    units = 0;
    runner = dataSource.createQueryRunner();
    await runner.startTransaction();
  });
  afterEach(async () => {
    for (const end of ends) await end.afterRollback(new Error('the test ended'));
    await runner.rollbackTransaction();
    await runner.release();
  });
  afterAll(async () => {
    join?.undo();
    deleteDataSourceByName('contract');
    await dataSource?.destroy();
  });

  it('finds the DataSource by the name addTransactionalDataSource() sets on it', () => {
    expect((dataSource as unknown as Record<string, unknown>)[TRANSACTIONAL_DATA_SOURCE]).toBe('contract');
    expect(join?.around).toBeTypeOf('function');
  });

  it('runs REQUIRED on the request’s manager, and fires its commit hook only after the request’s end says COMMIT', async () => {
    const service = new Service(dataSource);
    const ranOn = await join.around!(request(), runner.manager, () => service.required());
    expect(ranOn).toBe(runner.manager);
    await nextTurn();
    expect(hooks).toEqual([]);
    expect(ends).toHaveLength(1);
    await ends[0].afterCommit();
    await nextTurn();
    await nextTurn();
    expect(hooks).toEqual(['commit']);
  });

  it('enters its context’s run() once per @Transactional() call, where the join makes the call a unit of the request’s transaction', async () => {
    const service = new Service(dataSource);
    await join.around!(request(), runner.manager, async () => [await service.required(), await service.required()]);
    expect(units).toBe(2);
  });

  it('gives a @Transactional() call hooks of its own (setHookInContext(), maxHookHandlers): failed under a caller that goes on, its rollback hook fires at once, its commit hook never', async () => {
    const service = new Service(dataSource);
    await join.around!(request(), runner.manager, async () => {
      await service.requiredThenFail().catch(() => undefined);
      await nextTurn();
      expect(hooks).toEqual(['rollback: the method failed']);
      return service.required();
    });
    await ends[0].afterCommit();
    await nextTurn();
    await nextTurn();
    expect(hooks).toEqual(['rollback: the method failed', 'commit']);
    expect(units).toBe(2);
  });

  it('fires the rollback hook, with the error, once the request’s end says ROLLBACK', async () => {
    const service = new Service(dataSource);
    await join.around!(request(), runner.manager, () => service.required());
    await ends[0].afterRollback(new Error('the request failed'));
    await nextTurn();
    await nextTurn();
    expect(hooks).toEqual(['rollback: the request failed']);
  });

  it('asks for a transaction of its own for REQUIRES_NEW and NESTED, which the join runs outside the request, on another connection', async () => {
    const service = new Service(dataSource);
    const [requiresNew, nested] = await join.around!(request(), runner.manager, async () => [await service.requiresNew(), await service.nested()]);
    expect(outsideCalls).toBe(2);
    for (const manager of [requiresNew, nested]) {
      expect(manager).not.toBe(runner.manager);
      expect(manager.queryRunner).toBeDefined();
    }
  });

  it('leaves the app’s own dataSource.transaction() under the request’s emitter to join the request', async () => {
    const service = new Service(dataSource);
    await join.around!(request(), runner.manager, async () => {
      await service.required();
      return dataSource.transaction(async () => undefined);
    });
    expect(outsideCalls).toBe(0);
  });

  it('leaves the app’s own dataSource.transaction() inside a @Transactional() call, under the call’s own emitter, to join the request', async () => {
    const service = new Service(dataSource);
    await join.around!(request(), runner.manager, () => service.requiredWithOwnTransaction());
    expect(outsideCalls).toBe(0);
  });
});
