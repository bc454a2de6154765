import { canonicalRequest, fieldsJsonOf, fingerprintFieldsOf, type ReadBody } from './request-fingerprint.js';
import { RequestFingerprints } from './request-fingerprints.js';

/** The fingerprint a record stores without encryption. */
const fingerprintRequest = (operation: string, fields: unknown) => new RequestFingerprints().of({ scope: 'anonymous', key: 'k' }, canonicalRequest(operation, fields)).value;

const operation = 'POST /orders';
const request = (body: unknown, query: unknown = {}, params: unknown = {}) => ({ body, query, params });
const fingerprintOf = (req: ReturnType<typeof request>, spec?: Parameters<typeof fingerprintFieldsOf>[0]) =>
  fingerprintRequest(operation, fingerprintFieldsOf(spec)(req));

describe('request fingerprint', () => {
  it('is a SHA-256 in hex', () => {
    expect(fingerprintOf(request({ sku: 'a' }))).toMatch(/^[0-9a-f]{64}$/);
  });

  // Recorded with the canonicalize package (5.1.0) before the module canonicalised on its own: records keep replaying.
  it.each([
    ['an order', 'POST /orders', { params: {}, query: {}, body: { sku: 'book-42', quantity: 2 } }, '84bfafade689b44eab7fb6069897f609895dc3bdfcd40f9c250be5d0bd16b5c5'],
    [
      'numbers in exponent form and -0',
      'POST /payments',
      { params: { id: '7' }, query: { dryRun: 'true' }, body: { amount: 12.5, currency: 'EUR', meta: { b: [1e21, 1e-7, -0], a: null } } },
      'cd996a3e1b1c8068e2123837bc75d26421885553607b7e03ca17c00021c087c5',
    ],
    [
      'non-ASCII names and escapes',
      'POST /notes',
      { params: {}, query: {}, body: { é: 'crème brûlée', '\ud83d\ude02': 'emoji', '\ufb33': 'dalet', note: 'line\nbreak\u2028tab\t"quoted"' } },
      '7ee3573260d0161d7a1aa80b6148137e5a19eecef7ab7c3767755ae3e6f1084c',
    ],
    ['GraphQL arguments', 'createOrder', { input: { sku: 'x', tags: ['a', 'b'], price: 333333333.33333329 } }, 'bf62c3e517dbbc13214feab92264152225ee7f313f326fc1dcfe6c323c66f199'],
    ['no fields', 'POST /orders', undefined, 'cbbb2090ae97972a0ed714e04b86319469f597d286836a23c6ebf3d6ac2d1469'],
    ['a function’s value with a Date and an undefined member', 'POST /orders', { day: new Date(Date.UTC(2026, 0, 2)), sku: 'a', draft: undefined }, '86bd07ab03460517c7ff39490b8339c6c7bae3accc70b4db67166770d30f99f8'],
  ])('keeps the fingerprint recorded before for %s', (_case, operationName, fields, recorded) => {
    expect(fingerprintRequest(operationName, fields)).toBe(recorded);
  });

  it('writes as JSON what no canonical form holds: a fingerprint function’s value never takes the cache’s shortcut', () => {
    // JSON writes NaN and ±Infinity as null, where the canonical form refuses them: no JSON to compare.
    expect(fieldsJsonOf({ n: NaN })).toBeUndefined();
    expect(() => fingerprintRequest(operation, { n: NaN })).toThrow();
    expect(fieldsJsonOf({ n: null })).toBe('{"n":null}');
    expect(fieldsJsonOf({ n: 1n })).toBeUndefined();
  });

  it('gives a parsed 1e400 (Infinity) no JSON, where null has one: the cache never answers for what the canonical form refuses', () => {
    const infinite = JSON.parse('{"note":[1, {"deep": -1e400}]}');
    expect(fieldsJsonOf(infinite)).toBeUndefined();
    expect(() => fingerprintRequest(operation, infinite)).toThrow();
    expect(fieldsJsonOf(JSON.parse('{"note":[1, {"deep": null}]}'))).toBe('{"note":[1,{"deep":null}]}');
  });

  it('ignores key order, at every depth', () => {
    const a = request({ sku: 'a', quantity: 1, meta: { x: 1, y: [1, { p: 1, q: 2 }] } });
    const b = request({ meta: { y: [1, { q: 2, p: 1 }], x: 1 }, quantity: 1, sku: 'a' });
    expect(fingerprintOf(a)).toBe(fingerprintOf(b));
  });

  it('ignores whitespace of the JSON text and number spelling', () => {
    const a = request(JSON.parse('{"quantity":1.0,"price":1e2}'));
    const b = request(JSON.parse('{ "price" : 100 ,\n "quantity" : 1 }'));
    expect(fingerprintOf(a)).toBe(fingerprintOf(b));
  });

  it.each([
    ['a body value', request({ sku: 'a' }), request({ sku: 'b' })],
    ['array order', request({ items: [1, 2] }), request({ items: [2, 1] })],
    ['a query value', request({}, { dryRun: 'true' }), request({}, {})],
    ['a path param', request({}, {}, { id: '1' }), request({}, {}, { id: '2' })],
    ['a number against a string', request({ quantity: 1 }), request({ quantity: '1' })],
    ['a NUL character in a string', request({ note: 'a\u0000b' }), request({ note: 'ab' })],
  ])('tells apart %s', (_case, a, b) => {
    expect(fingerprintOf(a)).not.toBe(fingerprintOf(b));
  });

  it('tells operations apart', () => {
    const fields = fingerprintFieldsOf(undefined)(request({ sku: 'a' }));
    expect(fingerprintRequest('POST /orders', fields)).not.toBe(fingerprintRequest('POST /refunds', fields));
  });

  it('picks listed paths only', () => {
    const spec = ['body.sku', 'params.id'];
    const a = request({ sku: 'a', note: 'x' }, { page: '1' }, { id: '7' });
    const b = request({ sku: 'a', note: 'y' }, { page: '2' }, { id: '7' });
    expect(fingerprintOf(a, spec)).toBe(fingerprintOf(b, spec));
    expect(fingerprintOf(a, spec)).not.toBe(fingerprintOf(request({ sku: 'b' }, {}, { id: '7' }), spec));
  });

  it('drops excluded paths and keeps the rest, without touching the request', () => {
    const spec = { exclude: ['body.sentAt'] };
    const a = request({ sku: 'a', sentAt: '10:00' });
    const b = request({ sku: 'a', sentAt: '10:05' });
    expect(fingerprintOf(a, spec)).toBe(fingerprintOf(b, spec));
    expect(fingerprintOf(a, spec)).not.toBe(fingerprintOf(request({ sku: 'b', sentAt: '10:00' }), spec));
    expect(a.body).toEqual({ sku: 'a', sentAt: '10:00' });
  });

  it('counts a body read as bytes whole, whatever paths into it a spec picks or drops', () => {
    const digest = (sha256: string): ReadBody => ({ readAs: 'bytes', body: { contentType: 'application/octet-stream', size: 3, sha256 } });
    const [one, other] = [digest('a'.repeat(64)), digest('b'.repeat(64))];
    for (const spec of [['body.amount'], { exclude: ['body.sha256'] }, { exclude: ['body.sentAt'] }]) {
      const fields = fingerprintFieldsOf(spec);
      expect(canonicalRequest(operation, fields(request({}), one), 'bytes')).not.toBe(canonicalRequest(operation, fields(request({}), other), 'bytes'));
    }
    // A spec that leaves the body out leaves it out, read or not.
    const withoutBody = fingerprintFieldsOf({ exclude: ['body'] });
    expect(canonicalRequest(operation, withoutBody(request({}), one), 'bytes')).toBe(canonicalRequest(operation, withoutBody(request({}), other), 'bytes'));
  });

  it('uses a function of the request', () => {
    const spec = (req: { body: { sku: string } }) => req.body.sku.toLowerCase();
    expect(fingerprintOf(request({ sku: 'ABC' }), spec)).toBe(fingerprintOf(request({ sku: 'abc' }), spec));
  });
});
