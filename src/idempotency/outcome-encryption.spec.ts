import { createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';
import { IdempotencyConfigurationError } from './idempotency.exceptions.js';
import type { RecordId } from './records/stored-record.js';
import { type EncryptionKey, masterKeys, OutcomeEncryption, type SealContext, UnsealError, type UnsealFailure } from './outcome-encryption.js';

const KEY_A = Buffer.alloc(32, 0xa1);
const KEY_B = Buffer.alloc(32, 0xb2);
const ID: RecordId = { scope: 'tenant:acme', operation: 'POST /orders', key: 'order-1' };
const CONTEXT: SealContext = { id: ID, status: 201 };
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

/** The envelope with one base64url character of part `index` (0 version, 1 key id, 2 IV, 3 ciphertext and tag) changed. */
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
    expect(envelope).toMatch(/^v1\.k1\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]{22,}$/);
    expect(sealer.open(CONTEXT, envelope).equals(plaintext)).toBe(true);
  });

  it.each<[string, Partial<RecordId>]>([
    ['a scope with a newline in it', { scope: 'tenant:a\nPOST /orders' }],
    ['a very long tenant scope (HKDF info is capped at 1024 bytes)', { scope: `tenant:${'t'.repeat(5000)}` }],
    ['a key of visible ASCII', { key: '"quoted"\\and~more!' }],
  ])('opens what it sealed for %s', (_, change) => {
    const context = { id: { ...ID, ...change }, status: 200 };
    expect(sealer.open(context, sealer.seal(context, PLAINTEXT)).equals(PLAINTEXT)).toBe(true);
  });

  it('draws a fresh IV for every seal, so the same outcome never seals the same twice', () => {
    const envelopes = Array.from({ length: 500 }, () => sealer.seal(CONTEXT, PLAINTEXT));
    expect(new Set(envelopes.map((envelope) => envelope.split('.')[2])).size).toBe(500);
  });

  it('shows no plaintext, nor its base64', () => {
    const envelope = sealer.seal(CONTEXT, PLAINTEXT);
    for (const fragment of ['book-42', '/orders/7f3c', PLAINTEXT.toString('base64url').slice(4, 20)]) expect(envelope).not.toContain(fragment);
  });

  describe('refuses to open', () => {
    const envelope = sealer.seal(CONTEXT, PLAINTEXT);
    const other = (change: Partial<RecordId>, status = CONTEXT.status): SealContext => ({ id: { ...ID, ...change }, status });
    it.each<[string, SealContext, string, UnsealFailure]>([
      ['a row copied to another key', other({ key: 'order-2' }), envelope, 'authentication-failed'],
      ['a row copied to another operation', other({ operation: 'POST /refunds' }), envelope, 'authentication-failed'],
      ['a row copied to another tenant', other({ scope: 'tenant:globex' }), envelope, 'authentication-failed'],
      ['parts shifted between scope and operation', { id: { scope: 'tenant:acmePOST', operation: ' /orders', key: ID.key }, status: 201 }, envelope, 'authentication-failed'],
      ['a status changed in its column', other({}, 500), envelope, 'authentication-failed'],
      ['a changed ciphertext byte', CONTEXT, flipped(envelope, 3, 0), 'authentication-failed'],
      ['a changed tag byte', CONTEXT, flipped(envelope, 3, -2), 'authentication-failed'],
      ['a changed IV', CONTEXT, flipped(envelope, 2, 0), 'authentication-failed'],
      ['a truncated tag', CONTEXT, envelope.slice(0, -3), 'authentication-failed'],
      ['a key id it does not have', CONTEXT, envelope.replace('v1.k1.', 'v1.k9.'), 'unknown-key'],
      ['a newer envelope version', CONTEXT, envelope.replace(/^v1\./, 'v2.'), 'unsupported-version'],
      ['plaintext JSON', CONTEXT, PLAINTEXT.toString(), 'malformed'],
      ['an empty string', CONTEXT, '', 'malformed'],
      ['a missing part', CONTEXT, envelope.split('.').slice(0, 3).join('.'), 'malformed'],
      ['an extra part', CONTEXT, `${envelope}.AAAA`, 'malformed'],
      ['padded base64', CONTEXT, `${envelope}=`, 'malformed'],
      ['standard base64 characters', CONTEXT, `${envelope.slice(0, -1)}+`, 'malformed'],
      ['a short IV', CONTEXT, envelope.replace(/^(v1\.k1\.)[^.]{4}/, '$1'), 'malformed'],
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
      expect(after.seal(CONTEXT, PLAINTEXT)).toMatch(/^v1\.2025\./);
      expect(after.currentKeyId).toBe('2025');
    });

    it('leaves records of the new key unreadable to an instance without it', () => {
      expect(openFailure(before, CONTEXT, after.seal(CONTEXT, PLAINTEXT))).toBe('unknown-key');
    });
  });

  it('still opens an envelope written by an earlier release (the v1 format is fixed)', () => {
    // Sealed once with key id "fixture", the 32 bytes 0x00..0x1f, for ID and status 201.
    const fixture = only('fixture', Buffer.from(Array.from({ length: 32 }, (_, byte) => byte)));
    expect(fixture.open(CONTEXT, V1_FIXTURE).toString()).toBe('{"id":"7f3c","sku":"book-42","location":"/orders/7f3c"}');
  });
});

const V1_FIXTURE =
  'v1.fixture.4Xni_iDAyOdX4VFR.o4jC4UOOh7TMjnWK_EJC2TxCAluaI5nUSGF_IWb1K8ZQm55rbTYtMlTPFSlXX-A28hcDzJr1IJlpr173zPpIEn7Uvyxyodg';

describe('the v1 envelope format, as documented', () => {
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

  /** Opens an envelope from the documented format alone, with crypto.hkdfSync for the record key. */
  const openByHand = (master: Buffer, context: SealContext, envelope: string) => {
    const [version, keyId, ivText, sealedText] = envelope.split('.');
    const { id, status } = context;
    const identity = createHash('sha256').update(lengthPrefixed(id.scope, id.operation, id.key)).digest();
    const salt = Buffer.from('nest-idempotency/outcome-key/v1');
    const recordKey = Buffer.from(hkdfSync('sha256', master, salt, Buffer.concat([Buffer.from('record:'), identity]), 32));
    const sealed = Buffer.from(sealedText, 'base64url');
    const decipher = createDecipheriv('aes-256-gcm', recordKey, Buffer.from(ivText, 'base64url'), { authTagLength: 16 });
    decipher.setAAD(lengthPrefixed(version, keyId, id.scope, id.operation, id.key, String(status)));
    decipher.setAuthTag(sealed.subarray(-16));
    return Buffer.concat([decipher.update(sealed.subarray(0, -16)), decipher.final()]);
  };

  it('opens with node:crypto by hand: HKDF-SHA-256 per record (crypto.hkdfSync), AES-256-GCM, the identity and status as AAD', () => {
    const master = Buffer.from(Array.from({ length: 32 }, (_, byte) => byte));
    expect(openByHand(master, CONTEXT, V1_FIXTURE).toString()).toBe('{"id":"7f3c","sku":"book-42","location":"/orders/7f3c"}');
  });

  it.each<[string, SealContext]>([
    ['the usual identity', CONTEXT],
    ['multi-byte parts', { id: { scope: 'tenant:zürich', operation: 'POST /bestellungen/:id', key: 'k-1' }, status: 200 }],
    ['a scope far beyond 1024 bytes', { id: { ...ID, scope: `tenant:${'x'.repeat(4000)}` }, status: 402 }],
    ['empty parts', { id: { scope: '', operation: '', key: 'k' }, status: 204 }],
  ])('seals what the by-hand reading opens, under fresh keys: %s', (_, context) => {
    for (let i = 0; i < 5; i++) {
      const master = randomBytes(32);
      const envelope = only(`k${i}`, master).seal(context, PLAINTEXT);
      expect(openByHand(master, context, envelope).equals(PLAINTEXT)).toBe(true);
    }
  });
});

describe('masterKeys', () => {
  const base64 = KEY_A.toString('base64');
  it.each<[string, EncryptionKey[]]>([
    ['a Buffer', [{ id: 'k1', key: KEY_A }]],
    ['a Uint8Array', [{ id: 'k1', key: new Uint8Array(KEY_A) }]],
    ['a base64 string', [{ id: 'k1', key: base64 }]],
    ['a base64 string with surrounding whitespace', [{ id: 'k1', key: ` ${base64}\n` }]],
    ['a base64url string', [{ id: 'k1', key: KEY_B.toString('base64url') }]],
    ['several keys', [{ id: '2025-06', key: KEY_B }, { id: '2024_12', key: KEY_A }]],
  ])('takes %s', (_, keys) => {
    expect(masterKeys(keys).map((key) => key.id)).toEqual(keys.map((key) => key.id));
  });

  it.each<[string, unknown, RegExp]>([
    ['no keys', [], /at least one key/],
    ['no list', undefined, /at least one key/],
    ['a key of 16 bytes', [{ id: 'k1', key: Buffer.alloc(16) }], /must be 32 bytes, got 16/],
    ['a base64 string of 24 bytes', [{ id: 'k1', key: Buffer.alloc(24).toString('base64') }], /decodes to 24/],
    ['a hex string', [{ id: 'k1', key: KEY_A.toString('hex') }], /looks like hex/],
    ['a string that is not base64', [{ id: 'k1', key: 'not base64 at all!' }], /must be base64/],
    ['a number', [{ id: 'k1', key: 42 }], /Buffer or a base64 string/],
    ['an id with a dot, the envelope separator', [{ id: 'k.1', key: KEY_A }], /id must be/],
    ['an empty id', [{ id: '', key: KEY_A }], /id must be/],
    ['an id of 65 characters', [{ id: 'k'.repeat(65), key: KEY_A }], /id must be/],
    ['an id listed twice', [{ id: 'k1', key: KEY_A }, { id: 'k1', key: KEY_B }], /listed twice/],
  ])('refuses %s at startup', (_, keys, message) => {
    expect(() => masterKeys(keys as EncryptionKey[])).toThrow(IdempotencyConfigurationError);
    expect(() => masterKeys(keys as EncryptionKey[])).toThrow(message);
  });

  it('copies the key, so a caller that wipes its buffer afterwards changes nothing', () => {
    const material = Buffer.from(KEY_A);
    const sealer = new OutcomeEncryption(masterKeys([{ id: 'k1', key: material }]));
    const envelope = sealer.seal(CONTEXT, PLAINTEXT);
    material.fill(0);
    expect(sealer.open(CONTEXT, envelope).equals(PLAINTEXT)).toBe(true);
  });

  it('never shows the key material when printed', () => {
    const [key] = masterKeys([{ id: 'k1', key: KEY_A }]);
    expect(JSON.stringify(key)).not.toContain(KEY_A.toString('hex'));
    expect(JSON.stringify(key)).not.toContain(KEY_A.toString('base64'));
  });
});
