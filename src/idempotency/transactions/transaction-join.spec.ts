import { Column, DataSource, Entity, PrimaryColumn, type QueryRunner } from 'typeorm';
import { joinTransactions } from './transaction-join.js';
import { dataSourceOf } from './typeorm-internals.js';

@Entity({ name: 'contract_notes' })
class ContractNote {
  @PrimaryColumn('int')
  id: number;

  @Column('text')
  label: string;
}

/** A QueryRunner in a transaction that records what reaches it instead of a connection. */
function fakeRunner(dataSource: DataSource) {
  const statements: string[] = [];
  const fake = {
    isReleased: false,
    isTransactionActive: true,
    transactionDepth: 1,
    async query(sql: string) {
      statements.push(sql);
      return [];
    },
    async startTransaction() {
      statements.push(`SAVEPOINT typeorm_${fake.transactionDepth++}`);
    },
    async commitTransaction() {
      statements.push(`RELEASE SAVEPOINT typeorm_${--fake.transactionDepth}`);
    },
    async rollbackTransaction() {
      statements.push(`ROLLBACK TO SAVEPOINT typeorm_${--fake.transactionDepth}`);
    },
    async release() {
      throw new Error('the joined runner belongs to the transaction, not to its callers');
    },
  };
  const runner = fake as unknown as QueryRunner;
  Object.assign(runner, { manager: dataSource.createEntityManager(runner) });
  return { runner, statements };
}

/** The QueryRunner a query builder will run on (a protected property). */
const runnerOf = (builder: object) => (builder as { queryRunner?: QueryRunner }).queryRunner;

/**
 * The TypeORM internals the join relies on (transaction-join.ts). These fail
 * loudly if a TypeORM release changes them; no database is needed, since the
 * DataSource is never connected.
 */
describe('joining TypeORM paths to the current transaction (contract with TypeORM)', () => {
  let dataSource: DataSource;
  let current: QueryRunner | undefined;
  let unjoin: () => void;
  const ownProperties = (target: object) => Object.getOwnPropertyNames(target).sort();
  let pristine: { dataSource: string[]; manager: string[] };

  beforeEach(async () => {
    dataSource = new DataSource({ type: 'postgres', entities: [ContractNote] });
    // What initialize() does besides connecting: query builders with an alias look the entity up.
    await (dataSource as unknown as { buildMetadatas(): Promise<void> }).buildMetadatas();
    pristine = { dataSource: ownProperties(dataSource), manager: ownProperties(dataSource.manager) };
    current = undefined;
    unjoin = joinTransactions(dataSource, () => current);
  });
  afterEach(() => unjoin());

  // IdempotencyTransactionHost joins only the managers of the DataSource it serves: TypeORM 1.x names it `dataSource`, 0.3 `connection`.
  it('finds the DataSource of the default manager and of a QueryRunner’s', () => {
    expect(dataSourceOf(dataSource.manager)).toBe(dataSource);
    expect(dataSourceOf(fakeRunner(dataSource).runner.manager)).toBe(dataSource);
    expect(dataSourceOf(dataSource.createQueryRunner().manager)).toBe(dataSource);
  });

  it('leaves the default manager without a QueryRunner outside a transaction', () => {
    expect(dataSource.manager.queryRunner).toBeUndefined();
    expect(runnerOf(dataSource.createQueryBuilder())).toBeUndefined();
  });

  it('gives the default manager, its query builders and the DataSource’s own the current QueryRunner', () => {
    const { runner } = fakeRunner(dataSource);
    current = runner;
    expect(dataSource.manager.queryRunner).toBe(runner);
    expect(runnerOf(dataSource.manager.createQueryBuilder())).toBe(runner);
    expect(runnerOf(dataSource.manager.createQueryBuilder(ContractNote, 'n'))).toBe(runner);
    expect(runnerOf(dataSource.createQueryBuilder())).toBe(runner);
    expect(runnerOf(dataSource.createQueryBuilder(ContractNote, 'n'))).toBe(runner);
  });

  it('keeps a QueryRunner the caller passes', () => {
    const { runner } = fakeRunner(dataSource);
    const own = fakeRunner(dataSource).runner;
    current = runner;
    expect(runnerOf(dataSource.createQueryBuilder(ContractNote, 'n', own))).toBe(own);
    expect(runnerOf(dataSource.createQueryBuilder(own))).toBe(own);
    expect(own.manager.queryRunner).toBe(own);
  });

  it('sends raw queries of the DataSource, its manager and its repositories to the current QueryRunner', async () => {
    const { runner, statements } = fakeRunner(dataSource);
    current = runner;
    await dataSource.query('SELECT 1');
    await dataSource.manager.query('SELECT 2');
    await dataSource.getRepository(ContractNote).query('SELECT 3');
    expect(statements).toEqual(['SELECT 1', 'SELECT 2', 'SELECT 3']);
  });

  it('keeps repositories, cached or new, bound to the default manager and to no QueryRunner, so they follow whichever transaction is current', () => {
    const { runner } = fakeRunner(dataSource);
    current = runner;
    const repository = dataSource.getRepository(ContractNote);
    expect(repository.manager).toBe(dataSource.manager);
    expect(repository.queryRunner).toBeUndefined();
    current = undefined;
    expect(dataSource.getRepository(ContractNote)).toBe(repository);
    expect(repository.extend({}).manager).toBe(dataSource.manager);
  });

  it('makes dataSource.transaction() a savepoint on the current QueryRunner, which it neither creates nor releases', async () => {
    const { runner, statements } = fakeRunner(dataSource);
    current = runner;
    dataSource.createQueryRunner = () => {
      throw new Error('a new QueryRunner was asked for');
    };
    const manager = await dataSource.transaction(async (inner) => inner);
    await expect(dataSource.transaction(async () => Promise.reject(new Error('inner')))).rejects.toThrow('inner');
    expect(manager).toBe(runner.manager);
    expect(statements).toEqual(['SAVEPOINT typeorm_1', 'RELEASE SAVEPOINT typeorm_1', 'SAVEPOINT typeorm_1', 'ROLLBACK TO SAVEPOINT typeorm_1']);
  });

  it('undoes itself, leaving the DataSource as TypeORM made it', () => {
    unjoin();
    expect(ownProperties(dataSource)).toEqual(pristine.dataSource);
    expect(ownProperties(dataSource.manager)).toEqual(pristine.manager);
    current = fakeRunner(dataSource).runner;
    expect(dataSource.manager.queryRunner).toBeUndefined();
    expect(runnerOf(dataSource.createQueryBuilder())).toBeUndefined();
  });

  it('stays while another host still joins the DataSource', () => {
    const { runner } = fakeRunner(dataSource);
    const unjoinOther = joinTransactions(dataSource, () => runner);
    unjoin();
    expect(dataSource.manager.queryRunner).toBe(runner);
    unjoinOther();
    expect(ownProperties(dataSource.manager)).toEqual(pristine.manager);
    unjoin = () => undefined;
  });
});
