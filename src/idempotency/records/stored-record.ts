import type { IdempotencyRecordStatus } from './idempotency-record.entity.js';
import type { RecordedOutcome } from '../outcome/recorded-outcome.js';

/** What makes a key unique: the tenant scope, the operation and the key itself. */
export interface RecordId {
  readonly scope: string;
  readonly operation: string;
  readonly key: string;
}

/** What a phased operation needs to be finished by someone other than its first owner (the `resume` column). */
export interface ResumeInfo {
  operation: string;
  input: unknown;
  /** The route's success status and recordable error statuses. */
  status: number;
  storeErrors: number[];
  /** The route's retention, in ms; the module's for claims stored without it. */
  retention?: number;
  /** The phases finished so far, in the order they finished (see `savePhase`). */
  phases?: string[];
}

/** The part of a record the request flow reads. */
export interface StoredRecord {
  fingerprint: string;
  status: IdempotencyRecordStatus;
  outcome: RecordedOutcome | null;
  expiresAt: Date;
}

/** The columns of a record the flows read (`RECORD_COLUMNS`). */
export interface RecordRow {
  fingerprint: string;
  status: IdempotencyRecordStatus;
  response_status: number | null;
  /** Plaintext records: the headers. Sealed ones (encryption at rest): NULL, the headers are in the body's envelope. */
  response_headers: Record<string, string> | null;
  /** Plaintext records: the exact body text. Sealed ones: the envelope of headers and body. */
  response_body: string | null;
  expires_at: Date;
}

/** The columns a recorded outcome is read from: its own, and the fingerprint and expiry a sealed one is bound to. */
export interface OutcomeColumns {
  response_status: number;
  response_headers: Record<string, string> | null;
  response_body: string | null;
  fingerprint: string;
  expires_at: Date;
}

/**
 * The record an outcome is stored in, as far as the flow knows it when it
 * encodes the outcome: a sealed outcome is bound to its fingerprint and,
 * when given, its expiry.
 */
export interface OutcomeRecord {
  id: RecordId;
  fingerprint: string;
  /** The record's `expires_at`, where it is set before the outcome is stored (a claim first returns it). */
  expiresAt?: Date;
}

/**
 * An outcome as its columns store it, made only by `OutcomeCodec.encode`:
 * sealed when encryption is on. Statements that record an outcome take this,
 * never a RecordedOutcome, so none can write one around the codec.
 */
export type EncodedOutcome = {
  readonly status: number;
  /** JSON text of the headers; null when sealed. */
  readonly headers: string | null;
  readonly body: string | null;
} & { readonly __encodedBy: 'OutcomeCodec' };
