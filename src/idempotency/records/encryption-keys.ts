import { createHmac, createSecretKey, type KeyObject } from 'node:crypto';
import { IdempotencyConfigurationError } from '../errors/idempotency.exceptions.js';
import type { FingerprintKey } from '../fingerprint/request-fingerprints.js';

/** A master key as the module options take it: 32 bytes, as a Buffer or a base64 (or base64url) string. */
export interface EncryptionKey {
  /** Names the key in every record it seals: 1 to 64 letters, digits, `_` or `-`. */
  id: string;
  key: Uint8Array | string;
}

/**
 * A validated master key, kept as its HKDF pseudorandom key (the extract
 * step, which depends on the master key alone): record keys are expanded
 * from it. `fingerprintKey`, the key request fingerprints are HMACs under,
 * is expanded from it once, here, with a label of its own. KeyObjects,
 * which never print.
 */
export interface MasterKey extends FingerprintKey {
  prk: KeyObject;
}

const KEY_BYTES = 32;
const KEY_ID = /^[A-Za-z0-9_-]{1,64}$/;
/** Standard or URL-safe base64, padded or not (one alphabet at a time). */
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$|^[A-Za-z0-9_-]*={0,2}$/;
/** The HKDF salt: fixed, so that the per-record key is a function of the master key and the record alone. */
const HKDF_SALT = Buffer.from('nest-idempotency/outcome-key/v1');
/**
 * HKDF-Expand's info for the fingerprint key, then its one-block counter.
 * Record keys' info starts `record:`, so no record's key is this one.
 */
const FINGERPRINT_INFO = Buffer.from('request-fingerprint');
const FIRST_BLOCK = Buffer.from([1]);

/**
 * Validates the `encryption.keys` option, in order: the first seals. Throws
 * an IdempotencyConfigurationError that says what is wrong with which key.
 */
export function masterKeys(keys: readonly EncryptionKey[] | undefined): MasterKey[] {
  if (!Array.isArray(keys) || keys.length === 0) {
    throw new IdempotencyConfigurationError('encryption.keys must list at least one key: { id, key }, the key 32 bytes as a Buffer or a base64 string.');
  }
  const seen = new Set<string>();
  return keys.map(({ id, key }, index) => {
    const where = `encryption.keys[${index}]`;
    if (typeof id !== 'string' || !KEY_ID.test(id)) {
      throw new IdempotencyConfigurationError(`${where}: the id must be 1 to 64 letters, digits, "_" or "-" (it is written into every record the key seals), got ${JSON.stringify(id)}.`);
    }
    if (seen.has(id)) throw new IdempotencyConfigurationError(`${where}: the id "${id}" is listed twice; every key needs an id of its own.`);
    seen.add(id);
    const prk = extract(keyBytes(key, `${where} ("${id}")`));
    return { id, prk, fingerprintKey: fingerprintKeyOf(prk) };
  });
}

function keyBytes(key: Uint8Array | string, where: string): Buffer {
  if (typeof key === 'string') {
    const text = key.trim();
    if (!BASE64.test(text)) throw new IdempotencyConfigurationError(`${where}: a string key must be base64 or base64url; decode other encodings yourself, e.g. Buffer.from(hex, 'hex').`);
    const bytes = Buffer.from(text, 'base64'); // Node's base64 decoder reads the URL-safe alphabet too
    if (bytes.length !== KEY_BYTES) {
      const hint = /^[0-9a-fA-F]{64}$/.test(text) ? ` It looks like hex: pass Buffer.from(key, 'hex').` : ' Generate one with `openssl rand -base64 32`.';
      throw new IdempotencyConfigurationError(`${where}: the key must be ${KEY_BYTES} bytes; this base64 string decodes to ${bytes.length}.${hint}`);
    }
    return bytes;
  }
  if (!(key instanceof Uint8Array)) throw new IdempotencyConfigurationError(`${where}: the key must be a Buffer or a base64 string.`);
  if (key.length !== KEY_BYTES) throw new IdempotencyConfigurationError(`${where}: the key must be ${KEY_BYTES} bytes, got ${key.length}.`);
  return Buffer.from(key);
}

/** HKDF-Extract: PRK = HMAC-SHA-256(salt, master key). Nothing keeps the master key's own bytes. */
function extract(master: Buffer): KeyObject {
  return createSecretKey(createHmac('sha256', HKDF_SALT).update(master).digest());
}

/**
 * HKDF-Expand to one block: HMAC-SHA-256(PRK, `request-fingerprint` || 0x01),
 * the same bytes as `crypto.hkdfSync('sha256', master, salt, 'request-fingerprint', 32)`.
 */
function fingerprintKeyOf(prk: KeyObject): KeyObject {
  return createSecretKey(createHmac('sha256', prk).update(FINGERPRINT_INFO).update(FIRST_BLOCK).digest());
}
