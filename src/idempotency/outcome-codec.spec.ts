import { IdempotencyRecordUndecryptableException, type RecordUndecryptableReason } from './idempotency.exceptions.js';
import type { OutcomeColumns, RecordId } from './records/stored-record.js';
import { OutcomeCodec, type ResolvedEncryptionOptions } from './outcome-codec.js';
import { masterKeys, OutcomeEncryption } from './outcome-encryption.js';
import type { RecordedOutcome } from './recorded-outcome.js';

const ID: RecordId = { scope: 'tenant:acme', operation: 'POST /orders', key: 'order-1' };
const KEYS = masterKeys([{ id: 'k1', key: Buffer.alloc(32, 7) }]);
const encrypted = (acceptPlaintext = false): ResolvedEncryptionOptions => ({ keys: KEYS, acceptPlaintext });

/** What the columns hold after the statement wrote `encode`'s values (pg parses the jsonb column back). */
function stored(codec: OutcomeCodec, outcome: RecordedOutcome): OutcomeColumns {
  const encoded = codec.encode(ID, outcome);
  return { response_status: encoded.status, response_headers: encoded.headers === null ? null : JSON.parse(encoded.headers), response_body: encoded.body };
}

function failure(codec: OutcomeCodec, columns: OutcomeColumns): RecordUndecryptableReason | 'decoded' {
  try {
    codec.decode(ID, columns);
    return 'decoded';
  } catch (error) {
    if (error instanceof IdempotencyRecordUndecryptableException) return error.reason;
    throw error;
  }
}

const OUTCOMES: Array<[string, RecordedOutcome]> = [
  ['a JSON body with headers', { status: 201, headers: { location: '/orders/7f3c', 'content-type': 'application/json; charset=utf-8' }, body: '{"id":"7f3c"}' }],
  ['no body (204)', { status: 204, headers: {}, body: null }],
  ['an empty string body, which is not no body', { status: 200, headers: { 'content-type': 'text/plain; charset=utf-8' }, body: '' }],
  ['multi-byte text', { status: 200, headers: { etag: '"grüße"' }, body: 'Grüße, 注文 🚀' }],
  ['a recorded problem document', { status: 402, headers: { 'content-type': 'application/problem+json' }, body: '{"type":"about:blank","status":402}' }],
];

describe('OutcomeCodec', () => {
  describe('without encryption', () => {
    const codec = new OutcomeCodec(undefined);

    it.each(OUTCOMES)('stores %s as sent, and reads it back', (_, outcome) => {
      const columns = stored(codec, outcome);
      expect(columns).toEqual({ response_status: outcome.status, response_headers: outcome.headers, response_body: outcome.body });
      expect(codec.decode(ID, columns)).toEqual(outcome);
    });

    it('never replays a sealed record as if its envelope were the body', () => {
      expect(failure(codec, stored(new OutcomeCodec(encrypted()), OUTCOMES[0][1]))).toBe('encryption-off');
    });
  });

  describe('with encryption', () => {
    const codec = new OutcomeCodec(encrypted());

    it.each(OUTCOMES)('seals %s in one envelope, headers NULL, and reads it back', (_, outcome) => {
      const columns = stored(codec, outcome);
      expect(columns.response_headers).toBeNull();
      expect(columns.response_body).toMatch(/^v1\.k1\./);
      expect(columns.response_status).toBe(outcome.status);
      for (const value of [...Object.values(outcome.headers), outcome.body ?? '']) if (value.length > 2) expect(columns.response_body).not.toContain(value);
      expect(codec.decode(ID, columns)).toEqual(outcome);
    });

    it.each<[string, (columns: OutcomeColumns) => OutcomeColumns, RecordUndecryptableReason]>([
      ['a plaintext record', () => ({ response_status: 201, response_headers: {}, response_body: '{"id":"plain"}' }), 'plaintext-refused'],
      ['a plaintext record with no headers recorded', () => ({ response_status: 204, response_headers: {}, response_body: null }), 'plaintext-refused'],
      ['a sealed record whose status was changed', (columns) => ({ ...columns, response_status: 200 }), 'authentication-failed'],
      ['headers NULL and no body', (columns) => ({ ...columns, response_body: null }), 'malformed'],
      ['headers NULL and a plaintext body', (columns) => ({ ...columns, response_body: '{"id":"plain"}' }), 'malformed'],
    ])('refuses %s', (_, change, reason) => {
      expect(failure(codec, change(stored(codec, OUTCOMES[0][1])))).toBe(reason);
    });

    it.each<[string, Buffer]>([
      ['too short', Buffer.from([1, 0])],
      ['an unknown body kind', Buffer.from([9, 0, 0, 0, 2, ...Buffer.from('{}')])],
      ['a headers length past the end', Buffer.from([1, 0, 0, 1, 0, ...Buffer.from('{}')])],
      ['headers that are not JSON', Buffer.from([0, 0, 0, 0, 2, ...Buffer.from('{x')])],
      ['headers that are a JSON array', Buffer.from([0, 0, 0, 0, 2, ...Buffer.from('[]')])],
      ['bytes after the headers with no body', Buffer.from([0, 0, 0, 0, 2, ...Buffer.from('{}x')])],
    ])('refuses an authentic payload it did not write: %s', (_, payload) => {
      const envelope = new OutcomeEncryption(KEYS).seal({ id: ID, status: 201 }, payload);
      expect(failure(codec, { response_status: 201, response_headers: null, response_body: envelope })).toBe('malformed');
    });

    it('replays plaintext records with acceptPlaintext, and still seals what it records', () => {
      const migrating = new OutcomeCodec(encrypted(true));
      const plain = stored(new OutcomeCodec(undefined), OUTCOMES[0][1]);
      expect(migrating.decode(ID, plain)).toEqual(OUTCOMES[0][1]);
      expect(stored(migrating, OUTCOMES[0][1]).response_headers).toBeNull();
      expect(migrating.decode(ID, stored(codec, OUTCOMES[0][1]))).toEqual(OUTCOMES[0][1]);
    });
  });
});
