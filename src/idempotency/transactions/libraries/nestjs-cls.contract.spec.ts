import { ClsPluginTransactional, Propagation, Transactional, TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { Global, type INestApplicationContext, Module } from '@nestjs/common';
import { ModulesContainer } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import { ClsModule } from 'nestjs-cls';
import { DataSource, type EntityManager } from 'typeorm';
import type { LibraryJoin, Outside } from './library-join.js';
import { joinNestjsCls } from './nestjs-cls.js';

/** Each method answers the EntityManager it ran on, the plugin's `tx`. */
class Service {
  constructor(private readonly host: TransactionHost<TransactionalAdapterTypeOrm>) {}

  @Transactional()
  async required(): Promise<EntityManager> {
    return this.host.tx;
  }

  @Transactional(Propagation.RequiresNew)
  async requiresNew(): Promise<EntityManager> {
    return this.host.tx;
  }
}

/**
 * What `joinNestjsCls` relies on in @nestjs-cls/transactional
 * (nestjs-cls.ts): its TransactionHost is a provider whose `tx` is the
 * DataSource's manager outside a transaction; `@Transactional()` and
 * `withTransaction()` both go through the instance's `withTransaction()`,
 * with the propagation first where one is named; the adapter's
 * `defaultTxOptions` sit in the host's `_options`. These fail loudly when a
 * release changes them; the module would otherwise let RequiresNew join the
 * request, or start it below the plugin's isolation level.
 */
describe('joining @nestjs-cls/transactional (contract with the plugin and its TypeORM adapter)', () => {
  let dataSource: DataSource;
  let app: INestApplicationContext;
  let join: LibraryJoin | undefined;
  let service: Service;
  /** How many transactions the join ran outside the request. */
  let outsideCalls = 0;
  const outside: Outside = (work) => {
    outsideCalls++;
    return work();
  };

  beforeAll(async () => {
    dataSource = await new DataSource({ type: 'postgres', url: process.env.DATABASE_URL, extra: { max: 2 } }).initialize();

    @Global()
    @Module({ providers: [{ provide: DataSource, useValue: dataSource }], exports: [DataSource] })
    class DatabaseModule {}

    const adapter = new TransactionalAdapterTypeOrm({ dataSourceToken: DataSource, defaultTxOptions: { isolationLevel: 'REPEATABLE READ' } });
    const moduleRef = await Test.createTestingModule({
      imports: [DatabaseModule, ClsModule.forRoot({ global: true, plugins: [new ClsPluginTransactional({ adapter })] })],
    }).compile();
    app = await moduleRef.init();
    join = await joinNestjsCls(app.get(ModulesContainer), dataSource, outside);
    service = new Service(app.get(TransactionHost));
  });
  beforeEach(() => {
    outsideCalls = 0;
  });
  afterAll(async () => {
    join?.undo();
    await app?.close();
    await dataSource?.destroy();
  });

  it('finds the plugin’s TransactionHost on the DataSource, and its adapter’s default isolation level', () => {
    expect(join?.isolation).toBe('REPEATABLE READ');
  });

  it('runs @Transactional(Propagation.RequiresNew) outside, in a transaction of its own', async () => {
    const manager = await service.requiresNew();
    expect(outsideCalls).toBe(1);
    expect(manager.queryRunner).toBeDefined();
  });

  it('runs withTransaction(Propagation.RequiresNew, fn) outside', async () => {
    await app.get(TransactionHost).withTransaction(Propagation.RequiresNew, async () => undefined);
    expect(outsideCalls).toBe(1);
  });

  it('leaves Required to the plugin, which asks the DataSource for its transaction', async () => {
    const manager = await service.required();
    expect(outsideCalls).toBe(0);
    expect(manager).not.toBe(dataSource.manager);
  });
});
