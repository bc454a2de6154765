import { AdminProblemType, AdminRefusedException } from './admin.exceptions.js';
import { outboxQueryOf, reasonOf, recordIdOf, recordQueryOf, unfinishedQueryOf } from './admin-request.js';

const refusal = (parse: () => unknown) => {
  try {
    parse();
  } catch (error) {
    return error instanceof AdminRefusedException ? error.problem.type : error;
  }
  return undefined;
};

describe('admin request parameters', () => {
  it.each([
    ['a NUL in a scope', () => recordQueryOf({ scope: 'tenant:a\u0000' })],
    ['a NUL in a key', () => recordQueryOf({ key: 'k\u0000' })],
    ['a NUL in an operation', () => unfinishedQueryOf({ operation: 'POST /\u0000' })],
    ['a NUL in a record id', () => recordIdOf({ scope: 'anonymous', operation: 'POST /orders', key: '\u0000' })],
    ['a NUL in a reason', () => reasonOf({ reason: 'fixed\u0000' })],
    ['a NUL in a cursor', () => outboxQueryOf({ cursor: '\u0000' })],
    ['a parameter given twice', () => recordQueryOf({ key: ['a', 'b'] })],
    ['an unknown status', () => recordQueryOf({ status: 'done' })],
    ['a record id without its key', () => recordIdOf({ scope: 'anonymous', operation: 'POST /orders' })],
    ['an instant in words', () => recordQueryOf({ since: 'yesterday' })],
    ['a bare year, which Date takes', () => recordQueryOf({ since: '2020' })],
    ['a year before timestamptz reaches', () => recordQueryOf({ since: '-271821-04-20T00:00:00Z' })],
    ['a year past 9999', () => recordQueryOf({ until: '+275760-09-13T00:00:00Z' })],
    ['year 0', () => recordQueryOf({ since: '0000-06-01T00:00:00Z' })],
    ['a day Date rolls over', () => recordQueryOf({ since: '2025-02-30T00:00:00Z' })],
    ['month 13', () => recordQueryOf({ until: '2025-13-01T00:00' })],
  ])('refuse %s with a bad-request problem', (_case, parse) => {
    expect(refusal(parse)).toBe(AdminProblemType.BadRequest);
  });

  it.each([
    ['2025-06-01T12:00:00Z', '2025-06-01T12:00:00.000Z'],
    ['2025-06-01T12:00', '2025-06-01T12:00:00.000Z'],
    ['2025-06-01', '2025-06-01T00:00:00.000Z'],
    ['2025-06-01 12:00:00.123456+02:00', '2025-06-01T10:00:00.123Z'],
    ['2025-06-01T12:00:00-0130', '2025-06-01T13:30:00.000Z'],
    ['0001-01-01T00:00:00Z', '0001-01-01T00:00:00.000Z'],
    ['9999-12-31T23:59:59.999Z', '9999-12-31T23:59:59.999Z'],
  ])('read the instant %s as %s (no zone: UTC)', (since, read) => {
    expect(recordQueryOf({ since }).since?.toISOString()).toBe(read);
  });

  it('leave empty parameters out and keep any other character of a record id', () => {
    expect(recordQueryOf({ scope: '', key: '' })).toMatchObject({ scope: undefined, key: undefined });
    expect(recordIdOf({ scope: 'tenant:a%2Fb', operation: 'POST /orders/:id', key: '"k" \u00e9 <\u2028>' })).toEqual({ scope: 'tenant:a%2Fb', operation: 'POST /orders/:id', key: '"k" \u00e9 <\u2028>' });
  });
});
