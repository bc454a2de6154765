import { fieldsJsonOf, fingerprintFieldsOf, fingerprintRequest } from './request-fingerprint.js';

const operation = 'POST /orders';
const request = (body: unknown, query: unknown = {}, params: unknown = {}) => ({ body, query, params });
const fingerprintOf = (req: ReturnType<typeof request>, spec?: Parameters<typeof fingerprintFieldsOf>[0]) =>
  fingerprintRequest(operation, fingerprintFieldsOf(spec)(req));

describe('request fingerprint', () => {
  it('is a SHA-256 in hex', () => {
    expect(fingerprintOf(request({ sku: 'a' }))).toMatch(/^[0-9a-f]{64}$/);
  });

  it('writes as JSON what no canonical form holds: a fingerprint function’s value never takes the cache’s shortcut', () => {
    // NaN comes from no parser, but a function may return it: JSON writes null, the canonical form refuses it.
    expect(fieldsJsonOf({ n: NaN })).toBe(fieldsJsonOf({ n: null }));
    expect(() => fingerprintRequest(operation, { n: NaN })).toThrow();
    expect(fieldsJsonOf({ n: 1n })).toBeUndefined();
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

  it('uses a function of the request', () => {
    const spec = (req: { body: { sku: string } }) => req.body.sku.toLowerCase();
    expect(fingerprintOf(request({ sku: 'ABC' }), spec)).toBe(fingerprintOf(request({ sku: 'abc' }), spec));
  });
});
