import { AdminRefusedException } from './admin.exceptions.js';
import { pageSize, recordCursor, recordPosition, seqCursor, seqPosition } from './admin-cursor.js';

describe('admin cursors', () => {
  it('give back the position they were made from, whatever a key or scope holds', () => {
    const position = { at: '2026-01-01T12:00:00.123456Z', scope: 'tenant:a%2Fb version:2', operation: 'POST /orders/:id', key: '"quoted",\u00e9 <k>' };
    expect(recordPosition(recordCursor(position))).toEqual(position);
    expect(seqPosition(seqCursor('9007199254740993'))).toBe('9007199254740993');
  });

  it.each([
    ['not base64 JSON', '%%%'],
    ['another shape', Buffer.from(JSON.stringify({ at: 1 })).toString('base64url')],
    ['a position without an instant', Buffer.from(JSON.stringify(['soon', 's', 'o', 'k'])).toString('base64url')],
    ['a seq cursor for records', seqCursor('12')],
  ])('refuse %s as a bad request', (_case, cursor) => {
    expect(() => recordPosition(cursor)).toThrow(AdminRefusedException);
  });

  it('refuse a seq that is not a number', () => {
    expect(() => seqPosition(Buffer.from(JSON.stringify(['1; DROP'])).toString('base64url'))).toThrow(AdminRefusedException);
  });

  it.each([
    [undefined, 50],
    [1, 1],
    [200, 200],
  ])('take a page size of %s as %s', (limit, size) => expect(pageSize(limit)).toBe(size));

  it.each([0, 201, 2.5, Number.NaN])('refuse a page size of %s', (limit) => expect(() => pageSize(limit)).toThrow(AdminRefusedException));
});
