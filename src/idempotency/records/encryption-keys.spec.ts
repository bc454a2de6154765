import { hkdfSync } from 'node:crypto';
import { IdempotencyConfigurationError } from '../errors/idempotency.exceptions.js';
import { type EncryptionKey, masterKeys } from './encryption-keys.js';
import { OutcomeEncryption, type SealContext } from './outcome-encryption.js';

const KEY_A = Buffer.alloc(32, 0xa1);
const KEY_B = Buffer.alloc(32, 0xb2);
const CONTEXT: SealContext = { id: { scope: 'tenant:acme', operation: 'POST /orders', key: 'order-1' }, status: 201, fingerprint: 'a'.repeat(64) };
const PLAINTEXT = Buffer.from('{"id":"7f3c"}');

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

  it('derives the fingerprint key once per key as documented: HKDF-SHA-256 with the outcome keys\' salt and the label request-fingerprint', () => {
    const [a, b] = masterKeys([{ id: 'k1', key: KEY_A }, { id: 'k2', key: KEY_B }]);
    const documented = (master: Buffer) => Buffer.from(hkdfSync('sha256', master, 'nest-idempotency/outcome-key/v1', 'request-fingerprint', 32));
    expect(a.fingerprintKey.export().equals(documented(KEY_A))).toBe(true);
    expect(b.fingerprintKey.export().equals(documented(KEY_B))).toBe(true);
  });

  it('never shows the key material when printed', () => {
    const [key] = masterKeys([{ id: 'k1', key: KEY_A }]);
    expect(JSON.stringify(key)).not.toContain(KEY_A.toString('hex'));
    expect(JSON.stringify(key)).not.toContain(KEY_A.toString('base64'));
  });
});
