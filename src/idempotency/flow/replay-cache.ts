import { performance } from 'node:perf_hooks';
import type { RecordId } from '../records/stored-record.js';
import type { RecordedOutcome } from '../outcome/recorded-outcome.js';

/**
 * The request an outcome was recorded (or last replayed) for. Kept in memory
 * as the process has it: the fingerprint as its record stores it (keyed
 * under encryption), the fields' JSON in plaintext, as the outcome is.
 */
export interface CachedRequest {
  fingerprint: string;
  /** Its fingerprinted fields as JSON (`fieldsJsonOf`), where they are parsed data: a replay with the same JSON skips the fingerprint. */
  fieldsJson?: string;
}

interface CachedOutcome extends CachedRequest {
  outcome: RecordedOutcome;
  /** When the entry lapses on each process clock, in ms. */
  lapsesAt: ClockReading;
  /** What the entry counts against the byte bound. */
  bytes: number;
}

/** The cache's bounds; 0 in either turns it off. */
interface ReplayCacheLimits {
  maxEntries: number;
  /** Counted in UTF-8 bytes: the body, the header names and values, the key, the fingerprint and the fields' JSON. */
  maxBytes: number;
}

/** The process's wall clock and monotonic clock, in ms. */
interface ProcessClocks {
  wall(): number;
  monotonic(): number;
}

/** One reading of both process clocks. */
export interface ClockReading {
  wall: number;
  monotonic: number;
}

/** When a record expires, as the database said: its `expires_at`, and the database's `now()` when it was read. */
interface RecordLifetime {
  expiresAt: Date;
  databaseNow: Date;
}

const SYSTEM_CLOCKS: ProcessClocks = { wall: () => Date.now(), monotonic: () => performance.now() };

/** Bodies above this many bytes are not kept: replays of them read the record. */
const MAX_CACHED_BODY_BYTES = 64 * 1024;

/**
 * Entries lapse this much before the record's `expires_at`: the margin
 * covers the process clocks running slower than the database's (drift) over
 * an entry's life, and the database's clock stepping forward.
 */
export const CLOCK_SKEW_MARGIN_MS = 5000;

/**
 * Recorded outcomes, kept in process so that a replay costs no database round
 * trip. A completed record never changes until it expires, so an entry is
 * exact until its `expires_at`; it is keyed by the full (scope, operation,
 * key) and dropped before expiry, or when an operator releases the key
 * (`forget`). Bounded by entries and by bytes, least
 * recently used first out.
 *
 * Expiry is the database's clock: an entry lives for the time the record had
 * left when the database was asked (`expires_at - now()` in the same
 * statement), counted on the process's clocks from a reading taken before
 * asking. The offset between the process's clock and the database's cancels
 * out, so a process clock set wrong by any amount neither keeps an entry
 * past the record's expiry nor drops it early. An entry must be live on both
 * the wall clock and the monotonic clock: a wall clock stepped back, or a
 * monotonic clock paused while the host slept, cannot extend it.
 */
export class ReplayCache {
  private readonly entries = new Map<string, CachedOutcome>();
  private totalBytes = 0;
  /** When an operator last released a key (monotonic ms): no outcome read before it is kept. */
  private forgottenAt = -Infinity;

  constructor(
    private readonly limits: ReplayCacheLimits,
    private readonly clocks: ProcessClocks = SYSTEM_CLOCKS,
  ) {}

  /** Both clocks now: read before asking the database about a record, and pass to `set`. */
  readClocks(): ClockReading {
    return { wall: this.clocks.wall(), monotonic: this.clocks.monotonic() };
  }

  get(id: RecordId): CachedOutcome | undefined {
    const key = cacheKey(id);
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    this.entries.delete(key);
    if (entry.lapsesAt.wall <= this.clocks.wall() || entry.lapsesAt.monotonic <= this.clocks.monotonic()) {
      this.totalBytes -= entry.bytes;
      return undefined;
    }
    this.entries.set(key, entry); // most recently used last
    return entry;
  }

  /** Keeps an outcome for the time its record had left, from `askedAt`: a reading taken before the database answered. */
  set(id: RecordId, { fingerprint, fieldsJson }: CachedRequest, outcome: RecordedOutcome, lifetime: RecordLifetime, askedAt: ClockReading): void {
    const { maxEntries, maxBytes } = this.limits;
    if (maxEntries === 0 || maxBytes === 0 || askedAt.monotonic <= this.forgottenAt) return;
    const bodyBytes = Buffer.byteLength(outcome.body ?? '');
    if (bodyBytes > MAX_CACHED_BODY_BYTES) return;
    const lifeMs = lifetime.expiresAt.getTime() - lifetime.databaseNow.getTime() - CLOCK_SKEW_MARGIN_MS;
    if (!(lifeMs > 0)) return;
    const key = cacheKey(id);
    const bytes = Buffer.byteLength(key) + Buffer.byteLength(fingerprint) + Buffer.byteLength(fieldsJson ?? '') + bodyBytes + headerBytes(outcome.headers);
    if (bytes > maxBytes) return;
    this.remove(key);
    this.entries.set(key, { fingerprint, fieldsJson, outcome, lapsesAt: { wall: askedAt.wall + lifeMs, monotonic: askedAt.monotonic + lifeMs }, bytes });
    this.totalBytes += bytes;
    while (this.entries.size > maxEntries || this.totalBytes > maxBytes) this.remove(this.entries.keys().next().value!);
  }

  /**
   * Drops the outcome of a key an operator released (its record deleted
   * before it expired), and keeps out any outcome read before now: one a
   * request read before the release committed and caches after this call.
   * Without `id`, drops every entry (a release may have gone unheard).
   */
  forget(id?: RecordId): void {
    this.forgottenAt = this.clocks.monotonic();
    if (id) this.remove(cacheKey(id));
    else {
      this.entries.clear();
      this.totalBytes = 0;
    }
  }

  get size(): number {
    return this.entries.size;
  }

  /** What the entries count against `maxBytes`. */
  get bytes(): number {
    return this.totalBytes;
  }

  private remove(key: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    this.totalBytes -= entry.bytes;
  }
}

function headerBytes(headers: Record<string, string>): number {
  let bytes = 0;
  for (const [name, value] of Object.entries(headers)) bytes += Buffer.byteLength(name) + Buffer.byteLength(value);
  return bytes;
}

function cacheKey(id: RecordId): string {
  // NUL cannot occur in a valid key, operation or scope, so the joined form is unambiguous.
  return `${id.scope}\0${id.operation}\0${id.key}`;
}
