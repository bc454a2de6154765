/**
 * What a short `statement_timeout` keeps back from a lock wait, in ms, for
 * the statement's own work around it (well under a millisecond on an idle
 * server): 50 ms, or a quarter of a timeout shorter than 200 ms.
 */
const MARGIN_MS = 50;

/**
 * SQL for the `lock_timeout` a module statement sets for its wait on a key's
 * owner: `waitMs` (SQL for a whole number of ms, e.g. `$6::int`), or, where
 * the session's `statement_timeout` is shorter, that timeout less a margin.
 * The wait then runs out as a lock timeout (SQLSTATE 55P03, which the flow
 * answers 409 with Retry-After) before `statement_timeout` cancels the
 * statement (57014, a 500): a duplicate waits as long as the app's own
 * timeout lets it, and no longer. At least 1 ms, since 0 would turn the
 * timeout off.
 *
 * `statement_timeout` reads back in its own units ('0', '300ms', '5s',
 * '1min'), each a valid interval. Its clock started with the statement, so
 * it cannot be raised from inside it. Off (the usual case), nothing is
 * parsed: the subquery runs only when referenced.
 */
export function lockWaitOf(waitMs: string): string {
  return `(CASE current_setting('statement_timeout') WHEN '0' THEN ${waitMs}
            ELSE (SELECT greatest(1, floor(least(${waitMs}, greatest(ms * 0.75, ms - ${MARGIN_MS}))))::int
                    FROM (SELECT date_part('epoch', current_setting('statement_timeout')::interval) * 1000 AS ms) AS statement_timeout) END)::text || 'ms'`;
}

/** The first pause of a duplicate that polls a key's owner, and the longest, in ms. */
const FIRST_POLL_MS = 50;
const MAX_POLL_MS = 200;

/**
 * How long a duplicate pauses before its `poll`-th look at a key whose owner
 * holds no lock it could wait on (a phased operation's claim, committed
 * while the operation runs): growing from 50 to 200 ms, jittered so that a
 * crowd of duplicates spreads out, and never past what `remainingMs` of its
 * `wait` allows.
 */
export function ownerPollPause(poll: number, remainingMs: number): number {
  return Math.min(remainingMs, Math.min(MAX_POLL_MS, FIRST_POLL_MS * 1.5 ** poll) * (0.5 + Math.random()));
}
