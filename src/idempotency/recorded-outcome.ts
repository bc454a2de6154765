import type { AbstractHttpAdapter } from '@nestjs/core';

/** What a first execution answered: replayed byte for byte. */
export interface RecordedOutcome {
  status: number;
  /** Allowlisted response headers, names in lower case. */
  headers: Record<string, string>;
  /** The exact body text sent, or null for an empty body. */
  body: string | null;
}

export const REPLAYED_HEADER = 'Idempotent-Replayed';

/**
 * Carries an outcome whose status differs from the route's success status
 * (a recorded error) to the idempotency filter, which writes it as is.
 */
export class RecordedOutcomeResponse extends Error {
  constructor(
    readonly outcome: RecordedOutcome,
    readonly replayed: boolean,
  ) {
    super(`Recorded ${outcome.status} outcome`);
  }
}

export function applyOutcomeHeaders(
  adapter: AbstractHttpAdapter,
  response: unknown,
  outcome: RecordedOutcome,
  replayed: boolean,
): void {
  for (const [name, value] of Object.entries(outcome.headers)) adapter.setHeader(response, name, value);
  if (replayed) adapter.setHeader(response, REPLAYED_HEADER, 'true');
}

/** What the flow settled on for one request. */
export interface Settled {
  outcome: RecordedOutcome;
  replayed: boolean;
  /** When the record expires, where known: the outcome may then be cached until that instant. */
  expiresAt?: Date;
  /** The database's `now()` when `expiresAt` was read: the cache measures the time left on the database's clock. */
  databaseNow?: Date;
}
