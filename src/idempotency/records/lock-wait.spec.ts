import pg from 'pg';
import { lockWaitOf } from './lock-wait.js';
import { moduleTablesIn } from './module-tables.js';
import { IdempotencyStatements } from './record.statements.js';

const id = { scope: 'lock-wait', operation: 'POST /lock-wait', key: 'k' };
const statements = new IdempotencyStatements(moduleTablesIn('public'));

/**
 * A duplicate's wait on the key's owner under the app's `statement_timeout`:
 * it must run out as a lock timeout (55P03, a 409), never be cancelled by
 * that timeout (57014, a 500).
 */
describe('the lock wait of the module’s statements', () => {
  let session: pg.Client;
  let owner: pg.Client;

  beforeAll(async () => {
    [session, owner] = [new pg.Client({ connectionString: process.env.DATABASE_URL }), new pg.Client({ connectionString: process.env.DATABASE_URL })];
    await Promise.all([session.connect(), owner.connect()]);
  });
  afterEach(async () => {
    await Promise.all([session.query('ROLLBACK'), owner.query('ROLLBACK')]);
  });
  afterAll(async () => {
    await Promise.all([session?.end(), owner?.end()]);
  });

  it.each([
    ['off', '0', 2000, '2000ms'],
    ['longer than wait', '10s', 2000, '2000ms'],
    ['shorter than wait: less 50 ms', '1s', 2000, '950ms'],
    ['shorter than 200 ms: less a quarter', '100ms', 2000, '75ms'],
    ['in minutes', '1min', 120_000, '59950ms'],
    ['of 1 ms: still a wait', '1ms', 2000, '1ms'],
  ])('statement_timeout %s (%s), wait %i ms: lock_timeout %s', async (_case, statementTimeout, waitMs, lockTimeout) => {
    await session.query('BEGIN');
    await session.query(`SELECT set_config('statement_timeout', $1, true)`, [statementTimeout]);
    const { rows } = await session.query(`SELECT ${lockWaitOf('$1::int')} AS lock_timeout`, [waitMs]);
    expect(rows).toEqual([{ lock_timeout: lockTimeout }]);
  });

  it('runs out as a lock timeout while the owner holds the key, before a shorter statement_timeout would cancel the wait', async () => {
    await owner.query('BEGIN');
    await owner.query(statements.tryLock(id));
    await session.query(`BEGIN; SET LOCAL statement_timeout = '300ms'`);
    await expect(session.query(statements.waitForLock(id, 2000))).rejects.toMatchObject({ code: '55P03' });
  });

  it('hands the session’s own lock_timeout back once the wait is over', async () => {
    await session.query(`BEGIN; SET LOCAL statement_timeout = '300ms'; SET LOCAL lock_timeout = '7s'`);
    expect((await session.query(statements.waitForLock(id, 2000))).rows).toEqual([{ lock_timeout: '7s' }]);
  });
});
