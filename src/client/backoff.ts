/** Bounds of the exponential backoff between attempts. */
export interface BackoffOptions {
  /** The ceiling of the first retry's delay; it doubles per attempt. */
  baseDelayMs: number;
  /** No ceiling ever exceeds this. */
  maxDelayMs: number;
}

/**
 * The delay before the retry that follows failed attempt number `attempt`
 * (1-based): full jitter, a uniform draw between 0 and the capped exponential
 * ceiling. Full jitter spreads a crowd of clients that failed together, so
 * they do not come back together.
 *
 * @param random a source in [0, 1), like `Math.random`
 */
export function backoffDelay(attempt: number, options: BackoffOptions, random: () => number): number {
  const ceiling = Math.min(options.maxDelayMs, options.baseDelayMs * 2 ** Math.max(0, attempt - 1));
  return Math.floor(random() * ceiling);
}

/**
 * How long a `Retry-After` header asks to wait, in ms: delta-seconds or an
 * HTTP-date (RFC 9110 §10.2.3). A date in the past means no wait; a value
 * that is neither form is ignored (undefined), as the RFC lets clients do.
 *
 * @param now the current time in ms since the epoch, as `Date.now()`
 */
export function retryAfterMs(value: string | null | undefined, now: number): number | undefined {
  const text = value?.trim();
  if (!text) return undefined;
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  // Only date-shaped text: Date.parse also takes bare numbers and other loose forms.
  if (!/^[A-Za-z]{3,9},? /.test(text)) return undefined;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
