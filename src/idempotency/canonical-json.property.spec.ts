import canonicalize from 'canonicalize';
import fc from 'fast-check';
import { canonicalJson } from './canonical-json.js';

type Canonicaliser = (value: unknown) => string | undefined;

/** What a canonicaliser makes of a value: its text, or the error it refuses the value with. */
function outcome(canonicalise: Canonicaliser, value: unknown): { text: string | undefined } | { refused: string } {
  try {
    return { text: canonicalise(value) };
  } catch (error) {
    return { refused: (error as Error).message };
  }
}

const refusedOrText = (result: ReturnType<typeof outcome>) => ('refused' in result ? 'refused' : result);

/** Any UTF-16 code unit, a surrogate half of the time: strings of them hold pairs and lone surrogates alike. */
const codeUnit = fc.oneof(fc.integer({ min: 0, max: 0xffff }), fc.integer({ min: 0xd800, max: 0xdfff })).map((code) => String.fromCharCode(code));

/** JSON values of every kind a parser produces, with strings of any code points, and of any code units. */
const json = fc.oneof(
  fc.jsonValue({ maxDepth: 5 }),
  fc.jsonValue({ maxDepth: 4, stringUnit: 'binary' }),
  fc.jsonValue({ maxDepth: 3, stringUnit: 'grapheme' }),
  fc.jsonValue({ maxDepth: 3, stringUnit: codeUnit }),
);

/** A JSON value under 1 to 5,000 levels of arrays and objects. */
const nested = fc.tuple(fc.array(fc.boolean(), { minLength: 1, maxLength: 5_000 }), json).map(([levels, leaf]) =>
  levels.reduce<unknown>((inner, asArray) => (asArray ? [inner] : { a: inner }), leaf),
);

/** What a fingerprint function may return besides JSON: toJSON objects, boxed primitives, undefined, functions, NaN, BigInt, sparse arrays, null prototypes. */
const notJson = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.anything({ maxDepth: 3, withBoxedValues: true, withDate: true, withNullPrototype: true, withBigInt: true, withSparseArray: true, withMap: true, withSet: true, withTypedArray: true }),
    fc.constantFrom(undefined, NaN, Infinity, Symbol('s'), () => 1),
    tie('value').map((inner) => ({ toJSON: () => inner })),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.string({ maxLength: 4 }), tie('value'), { maxKeys: 4 }),
  ),
})).value;

describe('canonical JSON against the canonicalize package it replaces', () => {
  it('writes every JSON value as canonicalize does, and refuses what it refuses, with the same message', () => {
    fc.assert(
      fc.property(json, (value) => {
        expect(outcome(canonicalJson, value)).toEqual(outcome(canonicalize, value));
      }),
      { numRuns: 2_000 },
    );
  });

  it('writes the fields of a fingerprint, { operation, fields }, as canonicalize does', () => {
    fc.assert(
      fc.property(fc.string({ unit: codeUnit }), json, json, json, (operation, params, query, body) => {
        const fields = { operation, fields: { params, query, body } };
        expect(outcome(canonicalJson, fields)).toEqual(outcome(canonicalize, fields));
      }),
      { numRuns: 1_000 },
    );
  });

  it('writes deeply nested values as canonicalize does', () => {
    fc.assert(
      fc.property(nested, (value) => {
        expect(outcome(canonicalJson, value)).toEqual(outcome(canonicalize, value));
      }),
      { numRuns: 200 },
    );
  });

  it('writes what is not JSON as canonicalize does, and refuses what it refuses', () => {
    fc.assert(
      fc.property(notJson, (value) => {
        // Where a value is wrong twice over (a lone surrogate in a name, NaN in its value) the two may name different faults.
        expect(refusedOrText(outcome(canonicalJson, value))).toEqual(refusedOrText(outcome(canonicalize, value)));
      }),
      { numRuns: 2_000 },
    );
  });
});
