import type { RecordId } from './idempotency.store.js';
import type { RecordedOutcome } from './recorded-outcome.js';

interface CachedOutcome {
  fingerprint: string;
  outcome: RecordedOutcome;
  /** The record's `expires_at`, in ms since the epoch. */
  expiresAt: number;
}

/** Bodies above this are not kept: replays of them read the record. */
const MAX_CACHED_BODY = 64 * 1024;

/**
 * Entries lapse this much before `expires_at` (a database time): a process
 * clock a little behind the database's must not replay a record that another
 * instance may already have taken over.
 */
export const CLOCK_SKEW_MARGIN_MS = 5000;

/**
 * Recorded outcomes, kept in process so that a replay costs no database round
 * trip. A completed record never changes until it expires, so an entry is
 * exact until its `expires_at`; it is keyed by the full (scope, operation,
 * key) and dropped before expiry. Bounded, least recently used first out.
 */
export class ReplayCache {
  private readonly entries = new Map<string, CachedOutcome>();

  constructor(private readonly maxEntries: number) {}

  get(id: RecordId, now = Date.now()): CachedOutcome | undefined {
    const key = cacheKey(id);
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    this.entries.delete(key);
    if (entry.expiresAt - CLOCK_SKEW_MARGIN_MS <= now) return undefined;
    this.entries.set(key, entry); // most recently used last
    return entry;
  }

  set(id: RecordId, fingerprint: string, outcome: RecordedOutcome, expiresAt: Date): void {
    if (this.maxEntries === 0 || (outcome.body?.length ?? 0) > MAX_CACHED_BODY) return;
    const key = cacheKey(id);
    this.entries.delete(key);
    this.entries.set(key, { fingerprint, outcome, expiresAt: expiresAt.getTime() });
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
