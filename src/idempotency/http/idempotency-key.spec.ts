import { parseIdempotencyKey } from './idempotency-key.js';

describe('parseIdempotencyKey', () => {
  it.each([
    ['a bare token', ['order-1'], 'order-1'],
    ['a UUID', ['3f0c1d9e-8a0b-4c5e-9f1a-2b3c4d5e6f70'], '3f0c1d9e-8a0b-4c5e-9f1a-2b3c4d5e6f70'],
    ['an sf-string', ['"order-1"'], 'order-1'],
    ['an sf-string with escapes', ['"a\\"b\\\\c"'], 'a"b\\c'],
    ['surrounding spaces and tabs', [' \t order-1 \t'], 'order-1'],
    ['255 characters', ['k'.repeat(255)], 'k'.repeat(255)],
    ['punctuation', ["!#$%&'*+-.^_`|~"], "!#$%&'*+-.^_`|~"],
  ])('accepts %s', (_case, values, key) => {
    expect(parseIdempotencyKey(values)).toEqual({ kind: 'valid', key });
  });

  it('reports a missing header', () => {
    expect(parseIdempotencyKey([])).toEqual({ kind: 'missing' });
  });

  it.each([
    ['an empty value', ['']],
    ['an empty sf-string', ['""']],
    ['256 characters', ['k'.repeat(256)]],
    ['a repeated header', ['a', 'b']],
    ['an inner space', ['order 1']],
    ['a control character', ['order\u00011']],
    ['a tab', ['order\t1']],
    ['a non-breaking space around it', ['\u00a0order-1']],
    ['a line break around it', ['order-1\n']],
    ['non-ASCII', ['ordér-1']],
    ['an unterminated sf-string', ['"order-1']],
    ['text after an sf-string', ['"order"-1']],
    ['a bad escape', ['"a\\nb"']],
    ['a space inside an sf-string', ['"order 1"']],
  ])('rejects %s', (_case, values) => {
    expect(parseIdempotencyKey(values)).toMatchObject({ kind: 'malformed' });
  });
});
