import { createHash, createHmac, createSecretKey, hkdfSync } from 'node:crypto';
import { IdempotencyRecordUndecryptableException } from '../errors/idempotency.exceptions.js';
import { canonicalRequest } from './request-fingerprint.js';
import { type FingerprintedRecord, RequestFingerprints } from './request-fingerprints.js';

const OLD = { id: 'k2024', key: Buffer.alloc(32, 0xa1) };
const NEW = { id: 'k2025', key: Buffer.alloc(32, 0xb2) };
const RECORD: FingerprintedRecord = { scope: 'tenant:acme', key: 'pay-1' };
const OPERATION = 'POST /orders/:id/payments';
const fieldsOf = (card: string) => ({ params: { id: '7' }, query: {}, body: { amount: 1700, currency: 'EUR', card } });
const CANONICAL = canonicalRequest(OPERATION, fieldsOf('4111111111111111'));
const OTHER = canonicalRequest(OPERATION, fieldsOf('4111111111111112'));

/** The fingerprint key from the documented derivation alone: HKDF-SHA-256, the outcome keys' salt, its own label (encryption-keys.spec.ts holds masterKeys() to it). */
const fingerprintKeyOf = (master: Buffer) => Buffer.from(hkdfSync('sha256', master, 'nest-idempotency/outcome-key/v1', 'request-fingerprint', 32));
const keysOf = (...keys: Array<typeof OLD>) => keys.map(({ id, key }) => ({ id, fingerprintKey: createSecretKey(fingerprintKeyOf(key)) }));

const unencrypted = new RequestFingerprints();
const before = new RequestFingerprints(keysOf(OLD));
const rotated = new RequestFingerprints(keysOf(NEW, OLD));
const newOnly = new RequestFingerprints(keysOf(NEW));
/** The keyed fingerprint from the documented format alone. */
const keyedByHand = ({ id, key }: typeof OLD, record: FingerprintedRecord, canonical: string) =>
  `hmac.${id}.${createHmac('sha256', fingerprintKeyOf(key)).update(JSON.stringify([record.scope, record.key])).update(canonical).digest('hex')}`;
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

describe('request fingerprints', () => {
  it('stores the SHA-256 of the canonical request without encryption, as every release has', () => {
    expect(unencrypted.of(RECORD, CANONICAL).value).toBe(sha256(CANONICAL));
  });

  it('stores an HMAC under the first key with encryption: the hash of a guessed request does not match it, the documented derivation does', () => {
    const stored = before.of(RECORD, CANONICAL).value;
    expect(stored).toMatch(/^hmac\.k2024\.[0-9a-f]{64}$/);
    expect(stored).not.toContain(sha256(CANONICAL));
    expect(stored).toBe(keyedByHand(OLD, RECORD, CANONICAL));
    expect(rotated.of(RECORD, CANONICAL).value).toBe(keyedByHand(NEW, RECORD, CANONICAL));
  });

  it('binds the record: the same request under another key or scope stores another fingerprint', () => {
    const stored = before.of(RECORD, CANONICAL).value;
    expect(before.of({ ...RECORD, key: 'pay-2' }, CANONICAL).value).not.toBe(stored);
    expect(before.of({ ...RECORD, scope: 'tenant:globex' }, CANONICAL).value).not.toBe(stored);
    // The identity is a JSON array, so moving characters between scope and key moves the message too.
    expect(before.of({ scope: 'tenant:acme","pay', key: '1' }, CANONICAL).value).not.toBe(before.of({ scope: 'tenant:acme', key: 'pay","1' }, CANONICAL).value);
  });

  // Which stored fingerprint each instance takes for the request (true), refuses as another request's (false), or cannot check (a reason).
  const stored = {
    'plain, of this request': sha256(CANONICAL),
    'plain, of another request': sha256(OTHER),
    'keyed under the old key, this request': keyedByHand(OLD, RECORD, CANONICAL),
    'keyed under the old key, another request': keyedByHand(OLD, RECORD, OTHER),
    'keyed under the old key, this request for another record': keyedByHand(OLD, { ...RECORD, key: 'pay-2' }, CANONICAL),
    'keyed under the new key, this request': keyedByHand(NEW, RECORD, CANONICAL),
    'not a fingerprint': 'hmac.k2024.not-hex',
  };
  type Stored = keyof typeof stored;
  const verdicts: Array<[string, RequestFingerprints, Record<Stored, boolean | string>]> = [
    [
      'without encryption',
      unencrypted,
      {
        'plain, of this request': true,
        'plain, of another request': false,
        'keyed under the old key, this request': 'encryption-off',
        'keyed under the old key, another request': 'encryption-off',
        'keyed under the old key, this request for another record': 'encryption-off',
        'keyed under the new key, this request': 'encryption-off',
        'not a fingerprint': false,
      },
    ],
    [
      'with the old key',
      before,
      {
        'plain, of this request': true,
        'plain, of another request': false,
        'keyed under the old key, this request': true,
        'keyed under the old key, another request': false,
        'keyed under the old key, this request for another record': false,
        'keyed under the new key, this request': 'unknown-key',
        'not a fingerprint': false,
      },
    ],
    [
      'after a rotation (new key first, old listed)',
      rotated,
      {
        'plain, of this request': true,
        'plain, of another request': false,
        'keyed under the old key, this request': true,
        'keyed under the old key, another request': false,
        'keyed under the old key, this request for another record': false,
        'keyed under the new key, this request': true,
        'not a fingerprint': false,
      },
    ],
    [
      'with the new key only',
      newOnly,
      {
        'plain, of this request': true,
        'plain, of another request': false,
        'keyed under the old key, this request': 'unknown-key',
        'keyed under the old key, another request': 'unknown-key',
        'keyed under the old key, this request for another record': 'unknown-key',
        'keyed under the new key, this request': true,
        'not a fingerprint': false,
      },
    ],
  ];
  describe.each(verdicts)('%s', (_, fingerprints, expected) => {
    it.each(Object.keys(stored) as Stored[])('takes a fingerprint %s as expected', (name) => {
      const fingerprint = fingerprints.of(RECORD, CANONICAL);
      const verdict = expected[name];
      if (typeof verdict === 'boolean') {
        expect(fingerprint.matches(stored[name])).toBe(verdict);
        // What a statement compares in SQL takes the same fingerprints.
        expect(fingerprint.accepted().includes(stored[name])).toBe(verdict);
      } else {
        expect(() => fingerprint.matches(stored[name])).toThrow(IdempotencyRecordUndecryptableException);
        expect(() => fingerprint.matches(stored[name])).toThrow(expect.objectContaining({ reason: verdict }));
        expect(fingerprint.accepted()).not.toContain(stored[name]);
      }
    });
  });
});
