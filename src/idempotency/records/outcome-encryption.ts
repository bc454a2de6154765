import { createCipheriv, createDecipheriv, createHash, createHmac, type KeyObject, randomBytes } from 'node:crypto';
import { type EncryptionKey, type MasterKey, masterKeys } from './encryption-keys.js';
import { UnsealError } from '../errors/idempotency.exceptions.js';
import type { RecordId } from './stored-record.js';

/** What a sealed outcome is bound to: opening it anywhere else fails. */
export interface SealContext {
  id: RecordId;
  /** The record's `response_status`: a row whose status was changed does not open. */
  status: number;
  /** The record's `fingerprint`: a row given another request's fingerprint does not open for that request. */
  fingerprint: string;
  /**
   * The record's `expires_at`. Sealing binds it when given (the flow knew it
   * before the outcome); opening takes the row's, used when the envelope binds it.
   */
  expiresAt?: Date;
}

/** The `encryption` option with its default applied, its keys validated, and what seals with them. */
export interface ResolvedEncryptionOptions {
  keys: MasterKey[];
  sealer: OutcomeEncryption;
  acceptPlaintext: boolean;
}

/**
 * Resolves the `encryption` option. Loaded only where encryption is on
 * (`resolveModuleOptions`): an app without it loads none of its code.
 */
export function resolveEncryption({ keys, acceptPlaintext = false }: { keys: readonly EncryptionKey[]; acceptPlaintext?: boolean }): ResolvedEncryptionOptions {
  const masters = masterKeys(keys);
  return { keys: masters, sealer: new OutcomeEncryption(masters), acceptPlaintext };
}

/** The version new records are sealed with; v1 envelopes, which bind neither fingerprint nor expiry, still open. */
const ENVELOPE_VERSION = 'v2';
const IV_BYTES = 12;
const TAG_BYTES = 16;
/** `v2.<key id>.<bound>.<iv>.<ciphertext and tag>`, the last two in unpadded base64url. */
const V2_ENVELOPE = /^v2\.([A-Za-z0-9_-]{1,64})\.(fe?)\.([A-Za-z0-9_-]{16})\.([A-Za-z0-9_-]{22,})$/;
/** `v1.<key id>.<iv>.<ciphertext and tag>`. */
const V1_ENVELOPE = /^v1\.([A-Za-z0-9_-]{1,64})\.([A-Za-z0-9_-]{16})\.([A-Za-z0-9_-]{22,})$/;
/**
 * What a v2 envelope binds besides the identity and the status: `fe` the
 * fingerprint and the expiry, `f` the fingerprint alone, for a record whose
 * expiry the statement that stores the outcome sets (a phased operation's
 * finish, a retention of a fraction of a millisecond; records sealed `f`
 * before the claim always came first). It is authenticated data too, so it
 * cannot be changed to drop the expiry.
 */
type Bound = 'f' | 'fe';
/** HKDF-Expand's info: this label, then the SHA-256 of the record's identity. */
const HKDF_INFO_LABEL = Buffer.from('record:');
/** HKDF-Expand's block counter: one SHA-256 block is the whole 32-byte key. */
const FIRST_BLOCK = Buffer.from([1]);

/**
 * Seals recorded outcomes with AES-256-GCM, and opens them.
 *
 * Each record gets a key of its own, derived with HKDF-SHA-256 (RFC 5869)
 * from the master key, with the record's identity (scope, operation, key) in
 * the `info`: the same bytes as `crypto.hkdfSync('sha256', master, salt,
 * info, 32)`, with the extract step, which depends on the master key alone,
 * done once per key instead of per record (it was most of the cost).
 *
 * The additional authenticated data binds the envelope version, the key id,
 * what else is bound, that identity, the response status, the fingerprint
 * and, where known when sealing, the expiry: a sealed body copied to another
 * key, a status changed in place, another request's fingerprint written into
 * the row, or a record's life extended fails authentication. Every seal
 * draws a fresh random 96-bit IV.
 *
 * Envelope: `v2.<key id>.<bound>.<iv>.<ciphertext || 16-byte tag>`, base64url
 * without padding. Sealing uses the first key; opening takes the key the
 * envelope names. A v1 envelope (`v1.<key id>.<iv>.<...>`, written before
 * the fingerprint and expiry were bound) opens with v1's authenticated data.
 */
export class OutcomeEncryption {
  private readonly byId: ReadonlyMap<string, MasterKey>;

  constructor(private readonly keys: readonly MasterKey[]) {
    if (keys.length === 0) throw new Error('OutcomeEncryption needs at least one key');
    this.byId = new Map(keys.map((key) => [key.id, key]));
  }

  /** The id of the key new records are sealed with. */
  get currentKeyId(): string {
    return this.keys[0].id;
  }

  seal(context: SealContext, plaintext: Uint8Array): string {
    const master = this.keys[0];
    const bound: Bound = context.expiresAt ? 'fe' : 'f';
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', recordKey(master.prk, context.id), iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(additionalData({ version: ENVELOPE_VERSION, keyId: master.id, bound }, context));
    const sealed = Buffer.concat([cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
    return `${ENVELOPE_VERSION}.${master.id}.${bound}.${iv.toString('base64url')}.${sealed.toString('base64url')}`;
  }

  /** The plaintext, or an UnsealError saying why there is none. */
  open(context: SealContext, envelope: string): Buffer {
    const parts = parsed(envelope);
    const { keyId, ivText, sealedText } = parts;
    const master = this.byId.get(keyId);
    if (!master) throw new UnsealError('unknown-key', `sealed with key "${keyId}", which is not among the configured keys`);
    const iv = Buffer.from(ivText, 'base64url');
    const sealed = Buffer.from(sealedText, 'base64url');
    if (iv.length !== IV_BYTES || sealed.length < TAG_BYTES) throw new UnsealError('malformed', 'the IV or the tag has the wrong length');
    const decipher = createDecipheriv('aes-256-gcm', recordKey(master.prk, context.id), iv, { authTagLength: TAG_BYTES });
    decipher.setAAD(additionalData(parts, context));
    decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
    const body = decipher.update(sealed.subarray(0, sealed.length - TAG_BYTES));
    try {
      return Buffer.concat([body, decipher.final()]);
    } catch {
      throw new UnsealError('authentication-failed', 'the tag does not verify: tampered, sealed for another record, or under another key with this id');
    }
  }
}

/**
 * The record's own AES key, HKDF-Expand to one block: HMAC-SHA-256(PRK, info || 0x01),
 * the info being `record:` and the SHA-256 of the record's identity. (The identity goes in as
 * its hash so that the info stays within what `crypto.hkdfSync` accepts, 1024 bytes, however
 * long a scope or operation is: the derivation stays checkable against it.)
 */
function recordKey(prk: KeyObject, id: RecordId): Buffer {
  const identity = createHash('sha256').update(framed([id.scope, id.operation, id.key])).digest();
  return createHmac('sha256', prk).update(HKDF_INFO_LABEL).update(identity).update(FIRST_BLOCK).digest();
}

/** What an envelope says before its IV: the version, the key id and, from v2 on, what it binds. */
type EnvelopeHeader = { version: 'v1'; keyId: string } | { version: 'v2'; keyId: string; bound: Bound };
type Envelope = EnvelopeHeader & { ivText: string; sealedText: string };

function parsed(envelope: string): Envelope {
  const v2 = V2_ENVELOPE.exec(envelope);
  if (v2) return { version: 'v2', keyId: v2[1], bound: v2[2] as Bound, ivText: v2[3], sealedText: v2[4] };
  const v1 = V1_ENVELOPE.exec(envelope);
  if (v1) return { version: 'v1', keyId: v1[1], ivText: v1[2], sealedText: v1[3] };
  const version = /^(v\d+)\./.exec(envelope)?.[1];
  if (version && version !== 'v1' && version !== 'v2') throw new UnsealError('unsupported-version', `envelope version ${version} is not one this module reads (v1, v2)`);
  throw new UnsealError('malformed', 'not a v1 or v2 envelope');
}

/**
 * v1: version, key id, scope, operation, key, status. v2 adds what it binds
 * after the key id, and the fingerprint and the expiry (milliseconds since
 * the epoch, as node-postgres reads `expires_at`; empty when not bound) last.
 */
function additionalData(header: EnvelopeHeader, context: SealContext): Buffer {
  const { id, status } = context;
  if (header.version === 'v1') return framed([header.version, header.keyId, id.scope, id.operation, id.key, String(status)]);
  const parts = [header.version, header.keyId, header.bound, id.scope, id.operation, id.key, String(status), context.fingerprint];
  if (header.bound === 'f') return framed([...parts, '']);
  if (!context.expiresAt) throw new UnsealError('authentication-failed', 'the envelope binds an expiry, and the record has none');
  return framed([...parts, String(context.expiresAt.getTime())]);
}

/** Each part as a 4-byte big-endian length and its UTF-8 bytes: no two lists of parts frame the same. */
function framed(parts: readonly string[]): Buffer {
  const chunks: Buffer[] = [];
  for (const part of parts) {
    const bytes = Buffer.from(part, 'utf8');
    const length = Buffer.alloc(4);
    length.writeUInt32BE(bytes.length);
    chunks.push(length, bytes);
  }
  return Buffer.concat(chunks);
}
