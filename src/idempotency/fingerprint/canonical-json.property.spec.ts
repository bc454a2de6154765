import fc, { type JsonValue } from 'fast-check';
import { canonicalJson } from './canonical-json.js';

/** RFC 8785 for JSON values, as plainly as it can be written: recursive, members sorted by UTF-16 code units, primitives as JSON.stringify writes them. */
function reference(value: JsonValue): string {
  if (Array.isArray(value)) return `[${value.map(reference).join(',')}]`;
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  const names = Object.keys(value).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${names.map((name) => `${JSON.stringify(name)}:${reference(value[name]!)}`).join(',')}}`;
}

/** Whether a string, or any string or member name in a value, holds a surrogate without its other half. */
function holdsLoneSurrogate(value: JsonValue): boolean {
  // UTF-8 has no encoding for a lone surrogate: it goes in as U+FFFD.
  if (typeof value === 'string') return Buffer.from(value, 'utf8').toString('utf8') !== value;
  if (value === null || typeof value !== 'object') return false;
  if (Array.isArray(value)) return value.some(holdsLoneSurrogate);
  return Object.entries(value).some(([name, member]) => holdsLoneSurrogate(name) || holdsLoneSurrogate(member!));
}

/** Any UTF-16 code unit, a surrogate half of the time: strings of them hold pairs and lone surrogates alike. */
const codeUnit = fc.oneof(fc.integer({ min: 0, max: 0xffff }), fc.integer({ min: 0xd800, max: 0xdfff })).map((code) => String.fromCharCode(code));

/** JSON values of every kind a parser produces, with strings of any code points, and of any code units. */
const json = fc.oneof(
  fc.jsonValue({ maxDepth: 5 }),
  fc.jsonValue({ maxDepth: 4, stringUnit: 'binary' }),
  fc.jsonValue({ maxDepth: 3, stringUnit: 'grapheme' }),
  fc.jsonValue({ maxDepth: 3, stringUnit: codeUnit }),
);

/** A JSON value under 1 to 5,000 levels of arrays and objects, with the levels. */
const nested = fc.tuple(fc.array(fc.boolean(), { minLength: 1, maxLength: 5_000 }), fc.jsonValue({ maxDepth: 2 }));

const anything = fc.anything({ maxDepth: 3, withBoxedValues: true, withDate: true, withNullPrototype: true, withBigInt: true, withSparseArray: true, withMap: true, withSet: true, withTypedArray: true });

/**
 * What a fingerprint function may return besides JSON: toJSON objects, boxed
 * primitives, undefined, functions, NaN, BigInt, sparse arrays, null
 * prototypes. A toJSON that returns another toJSON object is left out: that
 * one is unwrapped again, as canonicalize 5 did, where JSON.stringify stops.
 */
const notJson = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    anything,
    fc.constantFrom(undefined, NaN, Infinity, Symbol('s'), () => 1),
    tie('container'),
    tie('container')
      .filter((inner) => typeof (inner as { toJSON?: unknown } | null)?.toJSON !== 'function')
      .map((inner) => ({ toJSON: () => inner })),
  ),
  container: fc.oneof(fc.array(tie('value'), { maxLength: 4 }), fc.dictionary(fc.string({ maxLength: 4 }), tie('value'), { maxKeys: 4 }), anything),
})).value;

describe('canonical JSON, as properties', () => {
  it('writes a JSON value as the plain recursive RFC 8785 does, and refuses exactly those holding a lone surrogate', () => {
    fc.assert(
      fc.property(json, (value) => {
        if (holdsLoneSurrogate(value)) expect(() => canonicalJson(value)).toThrow('Lone surrogate is not allowed');
        else expect(canonicalJson(value)).toBe(reference(value));
      }),
      { numRuns: 2_000 },
    );
  });

  it('reads back as the same value, and canonicalises its own text to itself', () => {
    fc.assert(
      fc.property(json, (value) => {
        fc.pre(!holdsLoneSurrogate(value));
        const text = canonicalJson(value)!;
        // JSON has one zero: -0 reads back as 0.
        expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify(value)));
        expect(canonicalJson(JSON.parse(text))).toBe(text);
      }),
      { numRuns: 1_000 },
    );
  });

  it('writes deeply nested values as the recursive form would, had it the stack', () => {
    fc.assert(
      fc.property(nested, ([levels, leaf]) => {
        const value = levels.reduce<unknown>((inner, asArray) => (asArray ? [inner] : { a: inner }), leaf);
        const text = levels.reduce((inner, asArray) => (asArray ? `[${inner}]` : `{"a":${inner}}`), reference(leaf));
        expect(canonicalJson(value)).toBe(text);
      }),
      { numRuns: 200 },
    );
  });

  it('writes what is not JSON as the JSON that JSON.stringify makes of it, or refuses it', () => {
    fc.assert(
      fc.property(notJson, (value) => {
        let text: string | undefined;
        try {
          text = canonicalJson(value);
        } catch {
          return; // NaN, ±Infinity, a BigInt, a lone surrogate: refused
        }
        const written = JSON.stringify(value);
        expect(text).toBe(written === undefined ? undefined : canonicalJson(JSON.parse(written)));
      }),
      { numRuns: 2_000 },
    );
  });
});
