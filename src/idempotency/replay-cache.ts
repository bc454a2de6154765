import { performance } from 'node:perf_hooks';
import type { RecordId } from './idempotency.store.js';
import type { RecordedOutcome } from './recorded-outcome.js';

interface CachedOutcome {
  fingerprint: string;
  outcome: RecordedOutcome;
  /** When the entry lapses on each process clock, in ms. */
  lapsesAt: ClockReading;
}

/** The process's wall clock and monotonic clock, in ms. */
export interface ProcessClocks {
  wall(): number;
  monotonic(): number;
}

/** One reading of both process clocks. */
export interface ClockReading {
  wall: number;
  monotonic: number;
}

/** When a record expires, as the database said: its `expires_at`, and the database's `now()` when it was read. */
export interface RecordLifetime {
  expiresAt: Date;
  databaseNow: Date;
}

const SYSTEM_CLOCKS: ProcessClocks = { wall: () => Date.now(), monotonic: () => performance.now() };

/** Bodies above this are not kept: replays of them read the record. */
const MAX_CACHED_BODY = 64 * 1024;

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
 * key) and dropped before expiry. Bounded, least recently used first out.
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

  constructor(
    private readonly maxEntries: number,
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
    if (entry.lapsesAt.wall <= this.clocks.wall() || entry.lapsesAt.monotonic <= this.clocks.monotonic()) return undefined;
    this.entries.set(key, entry); // most recently used last
    return entry;
  }

  /** Keeps an outcome for the time its record had left, from `askedAt`: a reading taken before the database answered. */
  set(id: RecordId, fingerprint: string, outcome: RecordedOutcome, lifetime: RecordLifetime, askedAt: ClockReading): void {
    if (this.maxEntries === 0 || (outcome.body?.length ?? 0) > MAX_CACHED_BODY) return;
    const lifeMs = lifetime.expiresAt.getTime() - lifetime.databaseNow.getTime() - CLOCK_SKEW_MARGIN_MS;
    if (!(lifeMs > 0)) return;
    const key = cacheKey(id);
    this.entries.delete(key);
    this.entries.set(key, { fingerprint, outcome, lapsesAt: { wall: askedAt.wall + lifeMs, monotonic: askedAt.monotonic + lifeMs } });
    if (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
  }

  get size(): number {
    return this.entries.size;
  }
}

function cacheKey(id: RecordId): string {
  // NUL cannot occur in a valid key, operation or scope, so the joined form is unambiguous.
  return `${id.scope}\0${id.operation}\0${id.key}`;
}
