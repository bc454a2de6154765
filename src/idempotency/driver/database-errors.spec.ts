import { asUnavailable, isConnectionLost, isKeyHeldAtCommit } from './database-errors.js';
import { isNamedStatementLost, unnamedAfter } from './named-statements.js';
import { IdempotencyDatabaseUnavailableException } from '../errors/idempotency.exceptions.js';

/** A driver error as TypeORM wraps it: the pg error sits on `driverError`. */
const wrapped = (code: string, message = 'failed') => Object.assign(new Error(message), { driverError: { code, message } });

describe('isConnectionLost', () => {
  it.each([
    ['a terminated backend (57P01)', wrapped('57P01', 'terminating connection due to administrator command'), true],
    ['a connection exception class (08006)', wrapped('08006'), true],
    ['a session ended for idling in its transaction (25P03)', wrapped('25P03', 'terminating connection due to idle-in-transaction timeout'), true],
    ['too many connections (53300)', wrapped('53300'), true],
    ['a refused connection', Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }), true],
    ['a socket closed under a query', new Error('Connection terminated unexpectedly'), true],
    ['a query on a runner TypeORM released when its connection errored', Object.assign(new Error('Query runner already released. Cannot run queries anymore.'), { name: 'QueryRunnerAlreadyReleasedError' }), true],
    [
      'a query through a manager whose runner TypeORM released',
      Object.assign(new Error('Database connection provided by a query runner was already released, cannot continue to use its querying methods anymore.'), {
        name: 'QueryRunnerProviderAlreadyReleasedError',
      }),
      true,
    ],
    ['a unique violation (23505)', wrapped('23505', 'duplicate key value violates unique constraint'), false],
    ['a lock timeout (55P03)', wrapped('55P03'), false],
    ['an application error', new Error('order not found'), false],
  ])('%s', (_case, error, lost) => {
    expect(isConnectionLost(error)).toBe(lost);
  });
});

describe('a named statement a pooler lost', () => {
  const lost = Object.assign(new Error('prepared statement "idempotency.try-lock" does not exist'), { code: '26000' });
  const mixedUp = Object.assign(new Error('prepared statement "idempotency.try-lock" already exists'), { code: '42P05' });

  it.each([
    ['does not exist (26000)', lost],
    ['already exists (42P05), wrapped by TypeORM', wrapped('42P05')],
  ])('is answered 503, retry with the same key: %s', (_case, error) => {
    expect(isNamedStatementLost(error)).toBe(true);
    expect(() => asUnavailable(error)).toThrow(IdempotencyDatabaseUnavailableException);
  });

  it('turns named statements off once, for every later statement', () => {
    const options = { preparedStatements: true };
    unnamedAfter(wrapped('23505'), options);
    expect(options.preparedStatements).toBe(true);
    unnamedAfter(mixedUp, options);
    expect(options.preparedStatements).toBe(false);
  });
});

describe('isKeyHeldAtCommit', () => {
  const violation = (constraint: string) => Object.assign(new Error(`duplicate key value violates unique constraint "${constraint}"`), { code: '23505', constraint });

  it.each([
    ['the records’ primary key violated by the plain insert', violation('idempotency_records_pkey'), true],
    ['the same, wrapped by TypeORM', Object.assign(new Error('failed'), { driverError: violation('idempotency_records_pkey') }), true],
    ['a unique violation of the handler’s own table', violation('orders_sku_key'), false],
    ['the claim at commit’s cast', Object.assign(new Error('invalid input syntax for type integer: "false:idempotency-key-held-at-commit"'), { code: '22P02' }), true],
    ['another invalid text representation', Object.assign(new Error('invalid input syntax for type integer: "x"'), { code: '22P02' }), false],
  ])('%s', (_case, error, held) => {
    expect(isKeyHeldAtCommit(error)).toBe(held);
  });
});
