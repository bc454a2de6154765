import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';
import type { RecordId } from './stored-record.js';
import { type EncryptionKey, masterKeys } from './encryption-keys.js';
import { UnsealError, type UnsealFailure } from '../errors/idempotency.exceptions.js';
import { OutcomeEncryption, type SealContext } from './outcome-encryption.js';

const KEY_A = Buffer.alloc(32, 0xa1);
const KEY_B = Buffer.alloc(32, 0xb2);
const ID: RecordId = { scope: 'tenant:acme', operation: 'POST /orders', key: 'order-1' };
/** Claimed first: the record's expiry is known when the outcome is sealed. */
const CONTEXT: SealContext = { id: ID, status: 201, fingerprint: 'a'.repeat(64), expiresAt: new Date(Date.UTC(2030, 0, 2, 3, 4, 5, 678)) };
/** Claimed at commit: the statement that stores the outcome sets the expiry. */
const AT_COMMIT: SealContext = { id: ID, status: 201, fingerprint: CONTEXT.fingerprint };
const ANOTHER_FINGERPRINT = 'b'.repeat(64);
const PLAINTEXT = Buffer.from('{"id":"7f3c","sku":"book-42","location":"/orders/7f3c"}');

const encryption = (...keys: EncryptionKey[]) => new OutcomeEncryption(masterKeys(keys));
const only = (id: string, key: Buffer) => encryption({ id, key });

/** The reason `open` fails with, or `opened` when it does not fail. */
function openFailure(sealer: OutcomeEncryption, context: SealContext, envelope: string): UnsealFailure | 'opened' {
  try {
    sealer.open(context, envelope);
    return 'opened';
  } catch (error) {
    if (error instanceof UnsealError) return error.reason;
    throw error;
  }
}

/** The envelope with one base64url character of part `index` (0 version, 1 key id, 2 bound, 3 IV, 4 ciphertext and tag) changed. */
function flipped(envelope: string, index: number, at: number): string {
  const parts = envelope.split('.');
  const part = parts[index];
  const position = at < 0 ? part.length + at : at;
  // 'A' and 'B' differ in the top bits of a base64url sextet, so the decoded bytes change even in a final, partial character.
  parts[index] = part.slice(0, position) + (part[position] === 'A' ? 'g' : 'A') + part.slice(position + 1);
  return parts.join('.');
}

describe('OutcomeEncryption', () => {
  const sealer = only('k1', KEY_A);

  it.each([
    ['an empty payload', Buffer.alloc(0)],
    ['JSON text', PLAINTEXT],
    ['multi-byte UTF-8', Buffer.from('Grüße, 注文 🚀')],
    ['every byte value', Buffer.from(Array.from({ length: 256 }, (_, byte) => byte))],
    ['1 MiB', Buffer.alloc(1024 * 1024, 'x')],
  ])('opens what it sealed: %s', (_, plaintext) => {
    const envelope = sealer.seal(CONTEXT, plaintext);
    expect(envelope).toMatch(/^v2\.k1\.fe\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]{22,}$/);
    expect(sealer.open(CONTEXT, envelope).equals(plaintext)).toBe(true);
  });

  it('binds the fingerprint alone when sealed without the expiry, and says so in the envelope', () => {
    const envelope = sealer.seal(AT_COMMIT, PLAINTEXT);
    expect(envelope).toMatch(/^v2\.k1\.f\./);
    // Opening is given the row's expiry, whatever it is.
    expect(sealer.open({ ...AT_COMMIT, expiresAt: new Date() }, envelope).equals(PLAINTEXT)).toBe(true);
    expect(openFailure(sealer, { ...AT_COMMIT, fingerprint: ANOTHER_FINGERPRINT }, envelope)).toBe('authentication-failed');
  });

  it.each<[string, Partial<RecordId>]>([
    ['a scope with a newline in it', { scope: 'tenant:a\nPOST /orders' }],
    ['a very long tenant scope (HKDF info is capped at 1024 bytes)', { scope: `tenant:${'t'.repeat(5000)}` }],
    ['a key of visible ASCII', { key: '"quoted"\\and~more!' }],
  ])('opens what it sealed for %s', (_, change) => {
    const context = { ...CONTEXT, id: { ...ID, ...change }, status: 200 };
    expect(sealer.open(context, sealer.seal(context, PLAINTEXT)).equals(PLAINTEXT)).toBe(true);
  });

  it('draws a fresh IV for every seal, so the same outcome never seals the same twice', () => {
    const envelopes = Array.from({ length: 500 }, () => sealer.seal(CONTEXT, PLAINTEXT));
    expect(new Set(envelopes.map((envelope) => envelope.split('.')[3])).size).toBe(500);
  });

  it('shows no plaintext, nor its base64', () => {
    const envelope = sealer.seal(CONTEXT, PLAINTEXT);
    for (const fragment of ['book-42', '/orders/7f3c', PLAINTEXT.toString('base64url').slice(4, 20)]) expect(envelope).not.toContain(fragment);
  });

  describe('refuses to open', () => {
    const envelope = sealer.seal(CONTEXT, PLAINTEXT);
    const atCommit = sealer.seal(AT_COMMIT, PLAINTEXT);
    const other = (change: Partial<RecordId>, status = CONTEXT.status): SealContext => ({ ...CONTEXT, id: { ...ID, ...change }, status });
    const expiring = (ms: number): SealContext => ({ ...CONTEXT, expiresAt: new Date(CONTEXT.expiresAt!.getTime() + ms) });
    it.each<[string, SealContext, string, UnsealFailure]>([
      ['a row copied to another key', other({ key: 'order-2' }), envelope, 'authentication-failed'],
      ['a row copied to another operation', other({ operation: 'POST /refunds' }), envelope, 'authentication-failed'],
      ['a row copied to another tenant', other({ scope: 'tenant:globex' }), envelope, 'authentication-failed'],
      ['parts shifted between scope and operation', other({ scope: 'tenant:acmePOST', operation: ' /orders' }), envelope, 'authentication-failed'],
      ['a status changed in its column', other({}, 500), envelope, 'authentication-failed'],
      ['another request’s fingerprint written over the record’s', { ...CONTEXT, fingerprint: ANOTHER_FINGERPRINT }, envelope, 'authentication-failed'],
      ['an expiry moved later', expiring(30 * 24 * 3600 * 1000), envelope, 'authentication-failed'],
      ['an expiry moved by a millisecond', expiring(1), envelope, 'authentication-failed'],
      ['a record with no expiry given', AT_COMMIT, envelope, 'authentication-failed'],
      ['the expiry dropped from what the envelope binds', CONTEXT, envelope.replace('.fe.', '.f.'), 'authentication-failed'],
      ['an expiry added to what the envelope binds', CONTEXT, atCommit.replace('.f.', '.fe.'), 'authentication-failed'],
      ['a v2 envelope relabelled v1, its bound part dropped', CONTEXT, envelope.replace(/^v2\.k1\.fe\./, 'v1.k1.'), 'authentication-failed'],
      ['a changed ciphertext byte', CONTEXT, flipped(envelope, 4, 0), 'authentication-failed'],
      ['a changed tag byte', CONTEXT, flipped(envelope, 4, -2), 'authentication-failed'],
      ['a changed IV', CONTEXT, flipped(envelope, 3, 0), 'authentication-failed'],
      ['a truncated tag', CONTEXT, envelope.slice(0, -3), 'authentication-failed'],
      ['a key id it does not have', CONTEXT, envelope.replace('v2.k1.', 'v2.k9.'), 'unknown-key'],
      ['a newer envelope version', CONTEXT, envelope.replace(/^v2\./, 'v3.'), 'unsupported-version'],
      ['a bound part it does not know', CONTEXT, envelope.replace('.fe.', '.fx.'), 'malformed'],
      ['a v2 envelope without its bound part', CONTEXT, envelope.replace('.fe.', '.'), 'malformed'],
      ['plaintext JSON', CONTEXT, PLAINTEXT.toString(), 'malformed'],
      ['an empty string', CONTEXT, '', 'malformed'],
      ['a missing part', CONTEXT, envelope.split('.').slice(0, 4).join('.'), 'malformed'],
      ['an extra part', CONTEXT, `${envelope}.AAAA`, 'malformed'],
      ['padded base64', CONTEXT, `${envelope}=`, 'malformed'],
      ['standard base64 characters', CONTEXT, `${envelope.slice(0, -1)}+`, 'malformed'],
      ['a short IV', CONTEXT, envelope.replace(/^(v2\.k1\.fe\.)[^.]{4}/, '$1'), 'malformed'],
      ['no tag at all', CONTEXT, envelope.replace(/\.[^.]+$/, '.AAAA'), 'malformed'],
    ])('%s', (_, context, changed, reason) => {
      expect(openFailure(sealer, context, changed)).toBe(reason);
    });

    it('a record sealed under another key with the same id', () => {
      expect(openFailure(only('k1', KEY_B), CONTEXT, envelope)).toBe('authentication-failed');
    });
  });

  describe('rotation', () => {
    const before = only('2024', KEY_A);
    const after = encryption({ id: '2025', key: KEY_B }, { id: '2024', key: KEY_A });

    it('opens records of an older key listed after the new one', () => {
      expect(after.open(CONTEXT, before.seal(CONTEXT, PLAINTEXT)).equals(PLAINTEXT)).toBe(true);
    });

    it('seals with the first key', () => {
      expect(after.seal(CONTEXT, PLAINTEXT)).toMatch(/^v2\.2025\./);
      expect(after.currentKeyId).toBe('2025');
    });

    it('leaves records of the new key unreadable to an instance without it', () => {
      expect(openFailure(before, CONTEXT, after.seal(CONTEXT, PLAINTEXT))).toBe('unknown-key');
    });
  });

  describe('v1 envelopes, sealed before the fingerprint and expiry were bound', () => {
    // Sealed once by an earlier release with key id "fixture", the 32 bytes 0x00..0x1f, for ID and status 201.
    const fixture = only('fixture', Buffer.from(Array.from({ length: 32 }, (_, byte) => byte)));

    it('still open (the v1 format is fixed)', () => {
      expect(fixture.open(CONTEXT, V1_FIXTURE).toString()).toBe('{"id":"7f3c","sku":"book-42","location":"/orders/7f3c"}');
    });

    it('open whatever the record’s fingerprint and expiry, which v1 does not bind', () => {
      expect(fixture.open({ ...AT_COMMIT, fingerprint: ANOTHER_FINGERPRINT, expiresAt: new Date() }, V1_FIXTURE).toString()).toContain('book-42');
    });

    it('still bind the identity and the status', () => {
      expect(openFailure(fixture, { ...CONTEXT, status: 200 }, V1_FIXTURE)).toBe('authentication-failed');
      expect(openFailure(fixture, { ...CONTEXT, id: { ...ID, key: 'order-2' } }, V1_FIXTURE)).toBe('authentication-failed');
    });
  });
});

const V1_FIXTURE =
  'v1.fixture.4Xni_iDAyOdX4VFR.o4jC4UOOh7TMjnWK_EJC2TxCAluaI5nUSGF_IWb1K8ZQm55rbTYtMlTPFSlXX-A28hcDzJr1IJlpr173zPpIEn7Uvyxyodg';

describe('the envelope formats, as documented', () => {
  /** Each part as its 4-byte big-endian length and its UTF-8 bytes. */
  const lengthPrefixed = (...parts: string[]) =>
    Buffer.concat(
      parts.flatMap((part) => {
        const bytes = Buffer.from(part);
        const length = Buffer.alloc(4);
        length.writeUInt32BE(bytes.length);
        return [length, bytes];
      }),
    );

  /** The record key, with crypto.hkdfSync: the same for both versions. */
  const recordKeyOf = (master: Buffer, { id }: SealContext) => {
    const identity = createHash('sha256').update(lengthPrefixed(id.scope, id.operation, id.key)).digest();
    const salt = Buffer.from('nest-idempotency/outcome-key/v1');
    return Buffer.from(hkdfSync('sha256', master, salt, Buffer.concat([Buffer.from('record:'), identity]), 32));
  };

  /** The AAD of an envelope whose parts before the IV are `header`. */
  const aadOf = ([version, keyId, bound]: string[], { id, status, fingerprint, expiresAt }: SealContext) =>
    version === 'v1'
      ? lengthPrefixed(version, keyId, id.scope, id.operation, id.key, String(status))
      : lengthPrefixed(version, keyId, bound, id.scope, id.operation, id.key, String(status), fingerprint, bound === 'fe' ? String(expiresAt!.getTime()) : '');

  /** Opens an envelope from the documented format alone. */
  const openByHand = (master: Buffer, context: SealContext, envelope: string) => {
    const parts = envelope.split('.');
    const [ivText, sealedText] = parts.slice(-2);
    const sealed = Buffer.from(sealedText, 'base64url');
    const decipher = createDecipheriv('aes-256-gcm', recordKeyOf(master, context), Buffer.from(ivText, 'base64url'), { authTagLength: 16 });
    decipher.setAAD(aadOf(parts.slice(0, -2), context));
    decipher.setAuthTag(sealed.subarray(-16));
    return Buffer.concat([decipher.update(sealed.subarray(0, -16)), decipher.final()]);
  };

  /** Seals a v1 envelope from the documented format alone, as an earlier release did. */
  const sealV1ByHand = (master: Buffer, keyId: string, context: SealContext, plaintext: Buffer) => {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', recordKeyOf(master, context), iv, { authTagLength: 16 });
    cipher.setAAD(aadOf(['v1', keyId], context));
    const sealed = Buffer.concat([cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
    return `v1.${keyId}.${iv.toString('base64url')}.${sealed.toString('base64url')}`;
  };

  it('opens v1 with node:crypto by hand: HKDF-SHA-256 per record (crypto.hkdfSync), AES-256-GCM, the identity and status as AAD', () => {
    const master = Buffer.from(Array.from({ length: 32 }, (_, byte) => byte));
    expect(openByHand(master, CONTEXT, V1_FIXTURE).toString()).toBe('{"id":"7f3c","sku":"book-42","location":"/orders/7f3c"}');
  });

  const contexts: Array<[string, SealContext]> = [
    ['the usual identity, its expiry bound', CONTEXT],
    ['the usual identity, its expiry not bound', AT_COMMIT],
    ['multi-byte parts', { id: { scope: 'tenant:zürich', operation: 'POST /bestellungen/:id', key: 'k-1' }, status: 200, fingerprint: 'c'.repeat(64) }],
    ['a scope far beyond 1024 bytes', { ...CONTEXT, id: { ...ID, scope: `tenant:${'x'.repeat(4000)}` }, status: 402 }],
    ['empty parts', { id: { scope: '', operation: '', key: 'k' }, status: 204, fingerprint: '', expiresAt: new Date(0) }],
  ];

  it.each(contexts)('seals v2 that the by-hand reading opens, under fresh keys: %s', (_, context) => {
    for (let i = 0; i < 5; i++) {
      const master = randomBytes(32);
      const envelope = only(`k${i}`, master).seal(context, PLAINTEXT);
      expect(openByHand(master, context, envelope).equals(PLAINTEXT)).toBe(true);
    }
  });

  it.each(contexts)('opens v1 sealed by hand, under fresh keys: %s', (_, context) => {
    for (let i = 0; i < 5; i++) {
      const master = randomBytes(32);
      const envelope = sealV1ByHand(master, `k${i}`, context, PLAINTEXT);
      expect(only(`k${i}`, master).open(context, envelope).equals(PLAINTEXT)).toBe(true);
    }
  });
});
