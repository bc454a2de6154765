import fc, { type JsonValue } from 'fast-check';
import { canonicalRequest, fieldsJsonOf, fingerprintFieldsOf, type FingerprintFields } from './request-fingerprint.js';
import { RequestFingerprints } from './request-fingerprints.js';

const runs = { numRuns: 300 };
const operation = 'POST /orders';

/** Draws a whole number in [0, size) from fast-check, so failures shrink and replay. */
type Pick = (size: number) => number;

/**
 * RFC 8785, written independently of canonical-json.ts: members
 * sorted by UTF-16 code units, numbers and strings as ECMAScript prints them.
 */
function canonicalJson(value: JsonValue): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  const keys = Object.keys(value).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key]!)}`).join(',')}}`;
}

/** A copy with the members of every object in a random order; arrays keep theirs, as order is data there. */
function deepShuffle(value: JsonValue, pick: Pick): JsonValue {
  if (Array.isArray(value)) return value.map((item) => deepShuffle(item, pick));
  if (value === null || typeof value !== 'object') return value;
  const entries = Object.entries(value);
  for (let i = entries.length - 1; i > 0; i--) {
    const j = pick(i + 1);
    [entries[i], entries[j]] = [entries[j], entries[i]];
  }
  // fromEntries defines own properties, so a `__proto__` member stays a member.
  return Object.fromEntries(entries.map(([key, item]) => [key, deepShuffle(item!, pick)]));
}

/** Spellings of one number that RFC 8785 treats as the same: exponent forms, padding zeros, the sign of zero. */
function spellNumber(value: number, pick: Pick): string {
  const [mantissa, exponentText] = Math.abs(value).toExponential().split('e');
  const exponent = Number(exponentText);
  const digits = mantissa.replace('.', '');
  const scale = exponent - (digits.length - 1);
  const sign = value < 0 || (value === 0 && pick(2) === 1) ? '-' : '';
  // JSON forbids leading zeros, so zero gets spellings of its own.
  if (value === 0) return sign + ['0', '0.0', '0e0', '0.000E+00', '0e-5'][pick(5)];
  const spellings = [
    JSON.stringify(Math.abs(value)),
    `${mantissa}e${exponentText}`,
    `${mantissa}E${exponent}`,
    `${digits}e${scale}`,
    `${digits}000e${scale - 3}`,
    `0.${digits}e${exponent + 1}`,
    `${mantissa}${mantissa.includes('.') ? '' : '.'}000e${exponent < 0 ? '-' : '+'}00${Math.abs(exponent)}`,
  ];
  return sign + spellings[pick(spellings.length)];
}

/** JSON text of `value` with whitespace and number spellings drawn at random. */
function respell(value: JsonValue, pick: Pick): string {
  const space = [' ', '\n', '\t', '\r\n  ', ''][pick(5)];
  if (typeof value === 'number') return spellNumber(value, pick);
  if (Array.isArray(value)) return `[${space}${value.map((item) => respell(item, pick)).join(`,${space}`)}]`;
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  const members = Object.entries(value).map(([key, item]) => `${JSON.stringify(key)}${space}:${space}${respell(item!, pick)}`);
  return `{${space}${members.join(`,${space}`)}${space}}`;
}

/** A copy of `value` that differs in one place, often barely: a number for its string, a value wrapped in an array. */
function nearMiss(value: JsonValue, pick: Pick, replacement: JsonValue): JsonValue {
  if (Array.isArray(value) && value.length > 0 && pick(3) > 0) {
    const at = pick(value.length);
    return value.map((item, index) => (index === at ? nearMiss(item, pick, replacement) : item));
  }
  const entries = value !== null && typeof value === 'object' && !Array.isArray(value) ? Object.entries(value) : [];
  if (entries.length > 0 && pick(3) > 0) {
    const at = pick(entries.length);
    return Object.fromEntries(entries.map(([key, item], index) => [key, index === at ? nearMiss(item!, pick, replacement) : item]));
  }
  const twists: JsonValue[] = [replacement, [value], { value }, JSON.stringify(value), null, false];
  if (typeof value === 'number') {
    const nudged = value + Math.max(Math.abs(value) * Number.EPSILON, Number.MIN_VALUE);
    // Near Number.MAX_VALUE the nudge overflows to Infinity, which JSON cannot carry: no near miss then.
    twists.push(-value, ...(Number.isFinite(nudged) ? [nudged] : []));
  }
  if (typeof value === 'string') twists.push(value.toUpperCase(), value.toLowerCase(), `${value} `);
  return twists[pick(twists.length)];
}

const json = fc.oneof(fc.jsonValue({ maxDepth: 4 }), fc.jsonValue({ maxDepth: 3, stringUnit: 'grapheme' }));
const pickFrom = (g: fc.GeneratorValue): Pick => (size) => g(fc.nat, size - 1);
const request = (body: unknown, query: unknown = {}, params: unknown = {}) => ({ params, query, body });
/** The fingerprint a record stores without encryption. */
const fingerprintRequest = (operationName: string, fields: unknown) => new RequestFingerprints().of({ scope: 'anonymous', key: 'k' }, canonicalRequest(operationName, fields)).value;
const fingerprintOf = (req: ReturnType<typeof request>, spec?: FingerprintFields) => fingerprintRequest(operation, fingerprintFieldsOf(spec)(req));
const memberName = fc.string({ minLength: 1, maxLength: 8 }).filter((name) => !name.includes('.'));
const members = fc.dictionary(memberName, json, { maxKeys: 5 });

describe('request fingerprint, as properties', () => {
  it('ignores member order at every depth', () => {
    fc.assert(
      fc.property(json, json, fc.gen(), (body, query, g) => {
        const shuffled = request(deepShuffle(body, pickFrom(g)), deepShuffle(query, pickFrom(g)));
        expect(fingerprintOf(shuffled)).toBe(fingerprintOf(request(body, query)));
      }),
      runs,
    );
  });

  it('ignores re-serialising with whitespace', () => {
    fc.assert(
      fc.property(json, fc.constantFrom(2, 4, '\t', ' \n'), (body, indent) => {
        expect(fingerprintOf(request(JSON.parse(JSON.stringify(body, null, indent))))).toBe(fingerprintOf(request(body)));
      }),
      runs,
    );
  });

  it('ignores how numbers are spelled, when they are equal', () => {
    fc.assert(
      fc.property(json, fc.gen(), (body, g) => {
        const text = respell(body, pickFrom(g));
        expect(fingerprintOf(request(JSON.parse(text)))).toBe(fingerprintOf(request(body)));
      }),
      runs,
    );
  });

  it.each([
    ['1.0', '1'],
    ['1e2', '100'],
    ['-0', '0'],
    ['0.1E1', '1'],
    ['12.50e-1', '1.25'],
  ])('treats %s as %s', (a, b) => {
    expect(fingerprintOf(request(JSON.parse(`{"n":${a}}`)))).toBe(fingerprintOf(request(JSON.parse(`{"n":${b}}`))));
  });

  it('tells apart values whose canonical JSON differs', () => {
    fc.assert(
      fc.property(json, json, fc.gen(), (body, replacement, g) => {
        const other = nearMiss(body, pickFrom(g), replacement);
        fc.pre(canonicalJson(other) !== canonicalJson(body));
        expect(fingerprintOf(request(other))).not.toBe(fingerprintOf(request(body)));
      }),
      runs,
    );
  });

  it('gives parsed fields that write the same JSON the same fingerprint (what a replay from the cache relies on)', () => {
    fc.assert(
      fc.property(json, json, fc.gen(), (body, replacement, g) => {
        const pick = pickFrom(g);
        const original = request(JSON.parse(respell(body, pick)));
        // What body parsers hand over: respelled (mostly the same JSON), reordered, barely different.
        for (const text of [respell(body, pick), JSON.stringify(deepShuffle(body, pick)), JSON.stringify(nearMiss(body, pick, replacement))]) {
          const retry = request(JSON.parse(text));
          if (fieldsJsonOf(retry) === fieldsJsonOf(original)) expect(fingerprintOf(retry)).toBe(fingerprintOf(original));
        }
      }),
      runs,
    );
  });

  it('tells operations apart for the same fields', () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), json, (a, b, fields) => {
        fc.pre(a !== b);
        expect(fingerprintRequest(a, fields)).not.toBe(fingerprintRequest(b, fields));
      }),
      runs,
    );
  });

  it('ignores an excluded member, and leaves the request untouched', () => {
    fc.assert(
      fc.property(members, memberName, json, json, (body, name, before, after) => {
        const spec = { exclude: [`body.${name}`] };
        const a = request({ ...body, [name]: before });
        const snapshot = structuredClone(a);
        expect(fingerprintOf(a, spec)).toBe(fingerprintOf(request({ ...body, [name]: after }), spec));
        expect(fingerprintOf(a, spec)).toBe(fingerprintOf(request(body), spec));
        expect(a).toEqual(snapshot);
      }),
      runs,
    );
  });

  it('depends on picked paths only', () => {
    fc.assert(
      fc.property(members, members, memberName, json, json, (body, otherBody, name, value, query) => {
        const spec = [`body.${name}`, 'params.id'];
        const a = request({ ...body, [name]: value }, query, { id: '7' });
        const b = request({ ...otherBody, [name]: value }, {}, { id: '7', page: 2 });
        expect(fingerprintOf(a, spec)).toBe(fingerprintOf(b, spec));
      }),
      runs,
    );
  });
});
