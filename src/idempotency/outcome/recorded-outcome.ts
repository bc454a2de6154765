import type { AbstractHttpAdapter } from '@nestjs/core';
import type { AttemptTimeline } from '../events/idempotency-event.types.js';
import { IdempotencyKeyReusedException } from '../errors/idempotency.exceptions.js';
import type { RequestFingerprint } from '../fingerprint/request-fingerprints.js';

/** What a first execution answered: replayed byte for byte. */
export interface RecordedOutcome {
  status: number;
  /** Allowlisted response headers, names in lower case. */
  headers: Record<string, string>;
  /** The exact body text sent, or null for an empty body. */
  body: string | null;
}

/** The response header a replay carries, with the value `true`. */
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

/**
 * What a flow saw on its way to its ending: the facts of the attempt event
 * that the dispatcher emits. A step that did not run is absent.
 */
export interface FlowSteps {
  /** It ran into a concurrent owner's claim (then replayed, or got a conflict). */
  collided: boolean;
  tookOver?: 'expired' | 'lease';
  claimMs?: number;
  handlerMs?: number;
  timeline: Omit<AttemptTimeline, 'start'>;
}

/** How a flow ended: settled on an outcome, or failed with the error to answer; the steps either way. */
export type FlowEnding<S extends Settled = Settled> = { steps: FlowSteps } & ({ settled: S; error?: undefined } | { error: unknown; settled?: undefined });

/** No step taken: an ending decided before any flow ran (a cached or fast replay, a bad key). */
export const NO_STEPS: Readonly<FlowSteps> = Object.freeze({ collided: false, timeline: Object.freeze({}) });

/**
 * The record's outcome, if it was recorded for this same request; `reused` is
 * what a different request gets. A record whose fingerprint cannot be checked
 * throws IdempotencyRecordUndecryptableException (see `RequestFingerprint.matches`).
 */
export function replayable(
  record: { fingerprint: string; outcome: RecordedOutcome | null },
  fingerprint: RequestFingerprint,
  reused: () => Error = () => new IdempotencyKeyReusedException(),
): RecordedOutcome {
  if (!fingerprint.matches(record.fingerprint)) throw reused();
  return record.outcome!;
}
