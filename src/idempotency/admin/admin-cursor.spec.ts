import { AdminRefusedException } from './admin.exceptions.js';
import { keySearchCursor, keySearchPosition, pageSize, recordCursor, recordPosition, seqCursor, seqPosition } from './admin-cursor.js';

describe('admin cursors', () => {
  it('give back the position they were made from, whatever a key or scope holds', () => {
    const position = { at: '2026-01-01T12:00:00.123456Z', scope: 'tenant:a%2Fb version:2', operation: 'POST /orders/:id', key: '"quoted",\u00e9 <k>' };
    expect(recordPosition(recordCursor(position))).toEqual(position);
    expect(seqPosition(seqCursor('9007199254740993'))).toBe('9007199254740993');
  });

  const encoded = (parts: unknown) => Buffer.from(JSON.stringify(parts)).toString('base64url');

  it.each([
    ['the first window', {}],
    ['a later window', { from: { scope: 'tenant:a', operation: 'POST /orders' } }],
    [
      'a later page of a window',
      { from: { scope: 'tenant:a', operation: 'POST /orders' }, to: { scope: 'tenant:z\u00e9', operation: 'PUT /x' }, after: { at: '2026-01-01T12:00:00.123456Z', scope: 'tenant:b', operation: 'POST /orders', key: 'k' } },
    ],
  ])('give back where a key search across every scope stood: %s', (_case, position) => {
    expect(keySearchPosition(keySearchCursor(position))).toEqual(position);
  });

  it.each([
    ['a record cursor', recordCursor({ at: '2026-01-01T12:00:00.123456Z', scope: 's', operation: 'o', key: 'k' })],
    ['a pair with a NUL', encoded(['pairs', ['s\u0000', 'o'], null, null])],
    ['a pair of another shape', encoded(['pairs', ['s'], null, null])],
    ['a position at a bare year', encoded(['pairs', null, null, ['2020', 's', 'o', 'k']])],
  ])('refuse %s as a key search cursor', (_case, cursor) => {
    expect(() => keySearchPosition(cursor)).toThrow(AdminRefusedException);
  });

  it.each([
    ['not base64 JSON', '%%%'],
    ['another shape', encoded({ at: 1 })],
    ['a position without an instant', encoded(['soon', 's', 'o', 'k'])],
    // Date.parse takes each of these; timestamptz refuses them.
    ['a position at a bare year', encoded(['2020', 's', 'o', 'k'])],
    ['a position on February 30', encoded(['2026-02-30T00:00:00.000000Z', 's', 'o', 'k'])],
    ['a position before year 1', encoded(['0000-12-31T00:00:00.000000Z', 's', 'o', 'k'])],
    ['a position whose key holds a NUL', encoded(['2026-01-01T12:00:00.123456Z', 's', 'o', 'k\u0000'])],
    ['a seq cursor for records', seqCursor('12')],
  ])('refuse %s as a bad request', (_case, cursor) => {
    expect(() => recordPosition(cursor)).toThrow(AdminRefusedException);
  });

  it.each([
    ['not a number', '1; DROP'],
    ['above the bigint range', '9223372036854775808'],
    ['negative', '-1'],
  ])('refuse a seq %s', (_case, seq) => {
    expect(() => seqPosition(encoded([seq]))).toThrow(AdminRefusedException);
  });

  it('take the largest seq a bigint holds', () => expect(seqPosition(seqCursor('9223372036854775807'))).toBe('9223372036854775807'));

  it.each([
    [undefined, 50],
    [1, 1],
    [200, 200],
  ])('take a page size of %s as %s', (limit, size) => expect(pageSize(limit)).toBe(size));

  it.each([0, 201, 2.5, Number.NaN])('refuse a page size of %s', (limit) => expect(() => pageSize(limit)).toThrow(AdminRefusedException));
});
