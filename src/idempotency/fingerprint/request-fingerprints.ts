import { createHmac, hash, type KeyObject } from 'node:crypto';
import { IdempotencyRecordUndecryptableException } from '../errors/idempotency.exceptions.js';

/**
 * A key that request fingerprints are HMACs under, with the id of the
 * encryption key it is derived from (records/encryption-keys.ts derives it
 * at startup).
 */
export interface FingerprintKey {
  id: string;
  fingerprintKey: KeyObject;
}

/** The record a fingerprint is written into: its scope and key (the operation is in the canonical request). */
export interface FingerprintedRecord {
  scope: string;
  key: string;
}

/** One request's fingerprint: what a record written for it stores, and which stored ones are its own. */
export interface RequestFingerprint {
  /** What a record written for this request stores. */
  readonly value: string;
  /**
   * Whether a stored fingerprint is this request's, whichever listed key (or
   * none) it was written under. A keyed one that cannot be checked (its key
   * is not listed, or encryption is off) throws
   * `IdempotencyRecordUndecryptableException`: it can be told neither this
   * request's nor another's, so it answers neither a replay nor 422.
   */
  matches(stored: string): boolean;
  /** Every stored fingerprint `matches` takes, for a statement that compares them itself. */
  accepted(): readonly string[];
}

/** A keyed fingerprint: `hmac.<key id>.<HMAC-SHA-256 in hex>`. */
const KEYED = /^hmac\.([A-Za-z0-9_-]{1,64})\.([0-9a-f]{64})$/;

/**
 * The fingerprints of requests, as records store them and retries are
 * recognised by.
 *
 * Without encryption, the SHA-256 (hex) of the canonical request
 * (`canonicalRequest`), as every release has stored it. With encryption,
 * `hmac.<key id>.<hex>`: the HMAC-SHA-256, under the first key's
 * fingerprint key, of `JSON.stringify([scope, key])` followed by the
 * canonical request. Whoever reads the table cannot test a guess of a
 * request without the key, and, the record's identity being in the HMAC,
 * cannot see that two records hold the same request either.
 *
 * A stored fingerprint is checked under the key it names, so a record
 * written before a rotation still replays and still answers 422. A plain
 * fingerprint (a record written before encryption, or by a release before
 * keyed fingerprints) is checked as a SHA-256 whatever `acceptPlaintext`
 * says: equal SHA-256s are as sure a match as equal HMACs, so checking it
 * can neither replay another request's answer nor refuse a retry its own,
 * and a sealed outcome opens only for the fingerprint its row held when it
 * was sealed (outcome-encryption.ts), so writing a plain one into a sealed
 * record opens nothing.
 */
export class RequestFingerprints {
  private readonly byId: ReadonlyMap<string, KeyObject>;

  /** `keys` in the order of `encryption.keys`: the first writes. None: encryption is off. */
  constructor(private readonly keys?: readonly FingerprintKey[]) {
    this.byId = new Map(keys?.map(({ id, fingerprintKey }) => [id, fingerprintKey]));
  }

  /** The fingerprint of a request for `record`, from its canonical form. */
  of(record: FingerprintedRecord, canonical: string): RequestFingerprint {
    return this.keys ? new KeyedFingerprint(this.keys, this.byId, JSON.stringify([record.scope, record.key]), canonical) : new PlainFingerprint(canonical);
  }
}

class PlainFingerprint implements RequestFingerprint {
  readonly value: string;

  constructor(canonical: string) {
    this.value = hash('sha256', canonical);
  }

  matches(stored: string): boolean {
    if (stored === this.value) return true;
    if (KEYED.test(stored)) throw new IdempotencyRecordUndecryptableException('encryption-off');
    return false;
  }

  accepted(): readonly string[] {
    return [this.value];
  }
}

class KeyedFingerprint implements RequestFingerprint {
  readonly value: string;
  private forms?: readonly string[];

  constructor(
    private readonly keys: readonly FingerprintKey[],
    private readonly byId: ReadonlyMap<string, KeyObject>,
    /** The record's identity, a JSON array: it ends where the canonical request begins, so no two messages read alike. */
    private readonly identity: string,
    private readonly canonical: string,
  ) {
    this.value = this.keyedUnder(keys[0].id, keys[0].fingerprintKey);
  }

  // Compared as strings: how much of an HMAC a guess shares with the stored one says nothing of the request.
  matches(stored: string): boolean {
    if (stored === this.value) return true;
    const keyed = KEYED.exec(stored);
    if (!keyed) return stored === hash('sha256', this.canonical);
    const key = this.byId.get(keyed[1]);
    if (!key) throw new IdempotencyRecordUndecryptableException('unknown-key');
    return stored === this.keyedUnder(keyed[1], key);
  }

  accepted(): readonly string[] {
    return (this.forms ??= [this.value, ...this.keys.slice(1).map(({ id, fingerprintKey }) => this.keyedUnder(id, fingerprintKey)), hash('sha256', this.canonical)]);
  }

  private keyedUnder(id: string, key: KeyObject): string {
    return `hmac.${id}.${createHmac('sha256', key).update(this.identity).update(this.canonical).digest('hex')}`;
  }
}
