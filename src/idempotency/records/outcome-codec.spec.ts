import { IdempotencyRecordUndecryptableException, type RecordUndecryptableReason } from '../errors/idempotency.exceptions.js';
import type { OutcomeColumns, OutcomeRecord, RecordId } from './stored-record.js';
import { OutcomeCodec } from './outcome-codec.js';
import { resolveEncryption, type ResolvedEncryptionOptions } from './outcome-encryption.js';
import type { RecordedOutcome } from '../outcome/recorded-outcome.js';

const ID: RecordId = { scope: 'tenant:acme', operation: 'POST /orders', key: 'order-1' };
/** Claimed first: the record's expiry is known when its outcome is encoded. */
const RECORD: OutcomeRecord = { id: ID, fingerprint: 'a'.repeat(64), expiresAt: new Date(Date.UTC(2030, 0, 2, 3, 4, 5, 678)) };
/** The columns an outcome is read with besides its own. */
const ROW = { fingerprint: RECORD.fingerprint, expires_at: RECORD.expiresAt! };
const KEY = { id: 'k1', key: Buffer.alloc(32, 7) };
const encrypted = (acceptPlaintext = false): ResolvedEncryptionOptions => resolveEncryption({ keys: [KEY], acceptPlaintext });

/**
 * What the columns hold after the statement wrote `encode`'s values (pg parses the jsonb column back),
 * in a record that expires at `expiresAt`: the statement's own when `encode` was not given it.
 */
function stored(codec: OutcomeCodec, outcome: RecordedOutcome, record: OutcomeRecord = RECORD, expiresAt = ROW.expires_at): OutcomeColumns {
  const encoded = codec.encode(record, outcome);
  const response_headers = encoded.headers === null ? null : JSON.parse(encoded.headers);
  return { response_status: encoded.status, response_headers, response_body: encoded.body, fingerprint: record.fingerprint, expires_at: record.expiresAt ?? expiresAt };
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
      expect(columns).toEqual({ response_status: outcome.status, response_headers: outcome.headers, response_body: outcome.body, ...ROW });
      expect(codec.decode(ID, columns)).toEqual(outcome);
    });

    describe('a body PostgreSQL’s text cannot hold (a NUL character)', () => {
      const nul: RecordedOutcome = { status: 201, headers: { 'content-type': 'text/plain; charset=utf-8' }, body: 'echo: a\u0000b \u0000' };

      it('stores it with no NUL in any column, and reads it back exactly', () => {
        const columns = stored(codec, nul);
        expect(columns.response_body).not.toContain('\u0000');
        expect(JSON.stringify(columns.response_headers)).not.toContain('\\u0000'); // jsonb refuses the escape too
        expect(codec.decode(ID, columns)).toEqual(nul);
      });

      it('stores it in the documented form: a JSON string literal, marked by a name no header has', () => {
        expect(stored(codec, nul)).toEqual({ response_status: 201, response_headers: { ...nul.headers, '(Body)': 'json' }, response_body: JSON.stringify(nul.body), ...ROW });
      });

      it.each<[string, Record<string, string>, string | null]>([
        ['an encoding it does not know', { '(Body)': 'base64' }, '"a"'],
        ['a body that is not a JSON string literal', { '(Body)': 'json' }, '{"a":1}'],
        ['a body that is not JSON', { '(Body)': 'json' }, 'a\\u0000'],
        ['no body', { '(Body)': 'json' }, null],
      ])('refuses a marked record that does not hold: %s', (_, headers, body) => {
        expect(failure(codec, { response_status: 200, response_headers: headers, response_body: body, ...ROW })).toBe('malformed');
      });

      it.each<[string, RecordedOutcome]>([
        ['only NUL', { status: 200, headers: {}, body: '\u0000' }],
        ['NUL beside text that is itself JSON', { status: 200, headers: { etag: '"x"' }, body: '"\u0000"' }],
      ])('reads back %s', (_, outcome) => {
        expect(codec.decode(ID, stored(codec, outcome))).toEqual(outcome);
      });

      it.each<[string, OutcomeColumns]>([
        ['a body that is a JSON string literal', { response_status: 200, response_headers: { 'content-type': 'application/json' }, response_body: '"\\u0000"', ...ROW }],
        ['a body with a backslash escape in it', { response_status: 200, response_headers: {}, response_body: 'a\\u0000b', ...ROW }],
      ])('reads a record stored before exactly as before: %s', (_, columns) => {
        expect(codec.decode(ID, columns)).toEqual({ status: columns.response_status, headers: columns.response_headers, body: columns.response_body });
      });
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
      expect(columns.response_body).toMatch(/^v2\.k1\.fe\./);
      expect(columns.response_status).toBe(outcome.status);
      for (const value of [...Object.values(outcome.headers), outcome.body ?? '']) if (value.length > 2) expect(columns.response_body).not.toContain(value);
      expect(codec.decode(ID, columns)).toEqual(outcome);
    });

    it.each<[string, (columns: OutcomeColumns) => OutcomeColumns, RecordUndecryptableReason]>([
      ['a plaintext record', () => ({ response_status: 201, response_headers: {}, response_body: '{"id":"plain"}', ...ROW }), 'plaintext-refused'],
      ['a plaintext record with no headers recorded', () => ({ response_status: 204, response_headers: {}, response_body: null, ...ROW }), 'plaintext-refused'],
      ['a sealed record whose status was changed', (columns) => ({ ...columns, response_status: 200 }), 'authentication-failed'],
      ['a sealed record given another request’s fingerprint', (columns) => ({ ...columns, fingerprint: 'b'.repeat(64) }), 'authentication-failed'],
      ['a sealed record whose expiry was moved later', (columns) => ({ ...columns, expires_at: new Date(columns.expires_at.getTime() + 1) }), 'authentication-failed'],
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
      const envelope = encrypted().sealer.seal({ ...RECORD, status: 201 }, payload);
      expect(failure(codec, { response_status: 201, response_headers: null, response_body: envelope, ...ROW })).toBe('malformed');
    });

    it('binds the fingerprint and not the expiry when the statement that stores the outcome sets the expiry (claimed at commit, a phased finish)', () => {
      const atCommit: OutcomeRecord = { id: ID, fingerprint: RECORD.fingerprint };
      const columns = stored(codec, OUTCOMES[0][1], atCommit, new Date(Date.UTC(2030, 5, 1)));
      expect(columns.response_body).toMatch(/^v2\.k1\.f\./);
      expect(codec.decode(ID, columns)).toEqual(OUTCOMES[0][1]);
      expect(codec.decode(ID, { ...columns, expires_at: new Date(Date.UTC(2031, 0, 1)) })).toEqual(OUTCOMES[0][1]);
      expect(failure(codec, { ...columns, fingerprint: 'b'.repeat(64) })).toBe('authentication-failed');
    });

    it('seals a body with a NUL character as any other, and reads it back exactly', () => {
      const nul: RecordedOutcome = { status: 201, headers: { 'content-type': 'text/plain; charset=utf-8' }, body: 'echo: a\u0000b' };
      expect(codec.decode(ID, stored(codec, nul))).toEqual(nul);
    });

    it('replays plaintext records with acceptPlaintext, and still seals what it records', () => {
      const migrating = new OutcomeCodec(encrypted(true));
      const plain = stored(new OutcomeCodec(undefined), OUTCOMES[0][1]);
      expect(migrating.decode(ID, plain)).toEqual(OUTCOMES[0][1]);
      expect(stored(migrating, OUTCOMES[0][1]).response_headers).toBeNull();
      expect(migrating.decode(ID, stored(codec, OUTCOMES[0][1]))).toEqual(OUTCOMES[0][1]);
      const nul: RecordedOutcome = { status: 200, headers: {}, body: 'a\u0000b' };
      expect(migrating.decode(ID, stored(new OutcomeCodec(undefined), nul))).toEqual(nul);
    });
  });
});
