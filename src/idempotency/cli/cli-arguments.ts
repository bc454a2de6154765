import { InvalidArgumentError } from 'commander';

/**
 * The longest `fail --retention`: 365 days. A failure blocks its key for its
 * whole retention, so a longer one is taken for a slip (seconds for
 * milliseconds, a zero too many) rather than kept for years.
 */
export const MAX_RETENTION_MS = 365 * 24 * 60 * 60 * 1000;

/**
 * `--retention <ms>`: a whole number of milliseconds from 1 to
 * `MAX_RETENTION_MS`; zero or less would write a failure that has already
 * expired. Anything else throws commander's InvalidArgumentError, which the
 * CLI answers as a usage error (exit 2) before it connects.
 */
export function parseRetention(value: string): number {
  const ms = /^\d+$/.test(value) ? Number(value) : NaN;
  if (!(ms >= 1 && ms <= MAX_RETENTION_MS)) {
    throw new InvalidArgumentError(`Give how long the failure replays in milliseconds, from 1 to ${MAX_RETENTION_MS} (365 days), e.g. 86400000 for 24 h.`);
  }
  return ms;
}

/**
 * ISO 8601 as people and psql write it: a date, then optionally a time
 * (`T` or a space, seconds and a fraction optional), then optionally a zone
 * (`Z`, `+09:00`, `+0900`, `+09`).
 */
const INSTANT = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?(Z|[+-]\d{2}(?::?\d{2})?)?)?$/i;

/**
 * `--since`, `--until`: an ISO 8601 instant, one without a zone read as
 * UTC, as the admin page and its API read it, so that the same value finds
 * the same records whatever `TZ` the shell has. Anything else (`June 1`,
 * `2025-02-30`) is a usage error rather than what `Date` would guess.
 *
 * @example
 * parseInstant('2025-06-01T09:00') // 2025-06-01T09:00:00.000Z
 */
export function parseInstant(value: string): Date {
  const parts = INSTANT.exec(value.trim());
  const date = parts && utc(parts);
  if (!date) throw new InvalidArgumentError('Give an ISO 8601 instant, e.g. 2025-06-01T12:00:00Z; one without a zone is UTC.');
  return date;
}

/** The instant the matched fields name, or null where a field is out of its range. */
function utc([, year, month, day, hour = '0', minute = '0', second = '0', fraction = '', zone = 'Z']: RegExpExecArray): Date | null {
  const [y, mo, d, h, mi, s] = [year, month, day, hour, minute, second].map(Number);
  const offset = zoneMinutes(zone);
  if (mo < 1 || mo > 12 || h > 23 || mi > 59 || s > 59 || offset === null) return null;
  // setUTCFullYear rather than Date.UTC, which reads the years 0 to 99 as 1900 to 1999.
  const date = new Date(0);
  date.setUTCFullYear(y, mo - 1, d);
  if (date.getUTCDate() !== d) return null;
  date.setUTCHours(h, mi - offset, s, Number(fraction.padEnd(3, '0').slice(0, 3)));
  return date;
}

function zoneMinutes(zone: string): number | null {
  if (zone.toUpperCase() === 'Z') return 0;
  const hours = Number(zone.slice(1, 3));
  const minutes = Number(zone.slice(3).replace(':', ''));
  if (hours > 23 || minutes > 59) return null;
  return (zone[0] === '-' ? -1 : 1) * (hours * 60 + minutes);
}
