import fc from 'fast-check';
import { parseIdempotencyKey, type ParsedIdempotencyKey } from './idempotency-key.js';

const runs = { numRuns: 500 };

/** The parser's answer without its free-text reason, to compare with the reference. */
type Verdict = { kind: 'missing' } | { kind: 'malformed' } | { kind: 'valid'; key: string };

const KEY = /^[\x21-\x7e]{1,255}$/;
// RFC 8941 §3.3.3: unescaped %x20-21 / %x23-5B / %x5D-7E, escapes only for DQUOTE and backslash.
const SF_STRING = /^"((?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*)"$/;
// RFC 9110 §5.5: a field value excludes leading and trailing OWS, which is SP and HTAB only.
const OWS_EDGES = /^[ \t]+|[ \t]+$/g;

/**
 * The contract, written from the HTTP contract (docs/http-contract.md) rather than from the parser: a value
 * that opens with DQUOTE is an sf-string, anything else a bare token, and the
 * key either names must be 1 to 255 visible ASCII characters.
 */
function referenceVerdict(values: readonly string[]): Verdict {
  if (values.length === 0) return { kind: 'missing' };
  if (values.length > 1) return { kind: 'malformed' };
  const value = values[0].replace(OWS_EDGES, '');
  const key = value.startsWith('"') ? SF_STRING.exec(value)?.[1].replace(/\\(["\\])/g, '$1') : value;
  return key !== undefined && KEY.test(key) ? { kind: 'valid', key } : { kind: 'malformed' };
}

function verdictOf(parsed: ParsedIdempotencyKey): Verdict {
  return parsed.kind === 'malformed' ? { kind: 'malformed' } : parsed;
}

/** The sf-string serialisation of a key. */
const quote = (key: string) => `"${key.replace(/[\\"]/g, '\\$&')}"`;

const visibleAscii = fc.integer({ min: 0x21, max: 0x7e }).map((code) => String.fromCharCode(code));
const validKey = fc.string({ unit: visibleAscii, minLength: 1, maxLength: 255 });
/** Mostly short, often right at the 255 limit, where off-by-one errors live. */
const keyLength = fc.oneof(fc.integer({ min: 0, max: 12 }), fc.integer({ min: 250, max: 260 }));
const keyOfAnyLength = keyLength.chain((length) => fc.string({ unit: visibleAscii, minLength: length, maxLength: length }));
/** Characters that break a key or a quoted string: controls, space, quotes, backslash, non-ASCII, a lone surrogate. */
const nastyChar = fc.oneof(
  fc.integer({ min: 0, max: 0x20 }).map((code) => String.fromCharCode(code)),
  fc.constantFrom('\x7f', '"', '\\', 'é', '\u00a0', '\u2028', '\ufeff', '😀', '\ud800', '\udc00'),
);
const httpWhitespace = fc.string({ unit: fc.constantFrom(' ', '\t'), maxLength: 3 });

/** An sf-string built from valid pieces and a few that must be refused (bad escapes, raw quotes, controls). */
const quotedValue = fc
  .tuple(
    fc.array(
      fc.oneof(
        { weight: 8, arbitrary: fc.oneof(visibleAscii, fc.constant(' ')).filter((char) => char !== '"' && char !== '\\') },
        { weight: 2, arbitrary: fc.constantFrom('\\"', '\\\\') },
        { weight: 1, arbitrary: fc.constantFrom('\\n', '\\t', '\\u0041', '\\', '"') },
        { weight: 1, arbitrary: nastyChar },
      ),
      { maxLength: 270 },
    ),
    fc.constantFrom('"', '', '"x', '""', '\\"'),
  )
  .map(([pieces, ending]) => `"${pieces.join('')}${ending}`);

/** A valid serialisation with one character inserted or removed somewhere. */
const nearMiss = fc
  .tuple(fc.oneof(validKey, validKey.map(quote)), fc.nat(), fc.option(nastyChar, { nil: undefined }))
  .map(([value, at, char]) => {
    const index = at % (value.length + 1);
    return char === undefined ? value.slice(0, index) + value.slice(index + 1) : value.slice(0, index) + char + value.slice(index);
  });

const headerValue = fc
  .tuple(
    httpWhitespace,
    fc.oneof(
      keyOfAnyLength,
      keyOfAnyLength.map(quote),
      quotedValue,
      nearMiss,
      fc.string({ unit: 'binary', maxLength: 300 }),
      fc.string({ unit: fc.oneof(visibleAscii, nastyChar), maxLength: 20 }),
    ),
    httpWhitespace,
  )
  .map(([before, value, after]) => before + value + after);

const headerValues = fc.oneof(
  { weight: 1, arbitrary: fc.constant<string[]>([]) },
  { weight: 12, arbitrary: headerValue.map((value) => [value]) },
  { weight: 2, arbitrary: fc.array(headerValue, { minLength: 2, maxLength: 3 }) },
);

/** Whitespace that String.prototype.trim removes but HTTP does not define as OWS. */
const NON_HTTP_WHITESPACE = ['\n', '\r', '\v', '\f', '\u00a0', '\u1680', '\u2000', '\u2028', '\u2029', '\u202f', '\u3000', '\ufeff'];

describe('parseIdempotencyKey, as properties', () => {
  it('accepts a header value exactly when the reference does, with the same key', () => {
    const seen = { missing: 0, malformed: 0, valid: 0 };
    fc.assert(
      fc.property(headerValues, (values) => {
        const expected = referenceVerdict(values);
        seen[expected.kind]++;
        expect(verdictOf(parseIdempotencyKey(values))).toEqual(expected);
      }),
      runs,
    );
    // The generators must reach both sides of the boundary, or the property says little.
    expect(seen.valid).toBeGreaterThan(runs.numRuns / 10);
    expect(seen.malformed).toBeGreaterThan(runs.numRuns / 10);
    expect(seen.missing).toBeGreaterThan(0);
  });

  it('reads back every valid key from its sf-string serialisation', () => {
    fc.assert(
      fc.property(validKey, httpWhitespace, (key, padding) => {
        expect(parseIdempotencyKey([padding + quote(key) + padding])).toEqual({ kind: 'valid', key });
      }),
      runs,
    );
  });

  it('reads back every valid key sent bare, unless it opens with a quote and so reads as an sf-string', () => {
    fc.assert(
      fc.property(
        validKey.filter((key) => !key.startsWith('"')),
        (key) => {
          expect(parseIdempotencyKey([key])).toEqual({ kind: 'valid', key });
        },
      ),
      runs,
    );
  });

  it('refuses a repeated header, even when every value is the same valid key', () => {
    fc.assert(
      fc.property(validKey, fc.integer({ min: 2, max: 4 }), (key, count) => {
        expect(parseIdempotencyKey(Array(count).fill(key))).toMatchObject({ kind: 'malformed' });
      }),
      runs,
    );
  });

  // Node decodes header bytes as latin1, so `\xA0abc` arrives as NBSP + `abc`: it must not name the key `abc`.
  it('refuses a key wrapped in whitespace that HTTP does not strip', () => {
    fc.assert(
      fc.property(validKey, fc.constantFrom(...NON_HTTP_WHITESPACE), (key, space) => {
        expect(parseIdempotencyKey([space + key])).toMatchObject({ kind: 'malformed' });
      }),
      runs,
    );
  });
});
