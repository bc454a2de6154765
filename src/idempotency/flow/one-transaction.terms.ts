import type { CallHandler, HttpException } from '@nestjs/common';
import type { QueryRunner } from 'typeorm';
import type { RequestFingerprint } from '../fingerprint/request-fingerprints.js';
import type { IsolationLevel } from '../options/idempotency.options.js';
import type { FlowSteps, RecordedOutcome, Settled } from '../outcome/recorded-outcome.js';
import type { RecordId } from '../records/stored-record.js';
import type { Abandonment } from './handler-run.js';

/** What the caller decides about one call of the flow: an HTTP route, a GraphQL field, a message handler. */
export interface OneTransactionTerms {
  retention: number;
  wait: number;
  /** The transaction's isolation level; the app's on the request's connection (`IdempotencyDataSource.isolationOn`) when absent. */
  isolation?: IsolationLevel;
  /** The outcome to record for the handler's result. */
  capture(result: unknown): RecordedOutcome;
  /**
   * A failure to record as the outcome, its writes undone back to a
   * savepoint taken before the handler ran. Absent, every failure rolls back.
   */
  storesError?(error: unknown): error is HttpException;
  /** The error for a key still held by an owner in flight. */
  inProgress(): Error;
  /** The error for a key recorded for a different request; the module's 422 by default. */
  reused?(): Error;
  /**
   * Puts back the response's status and headers as the handler found them:
   * nothing it set is sent when its outcome is not the answer (it failed to
   * commit, or lost the key to a claim that took no lock).
   */
  restoreResponse?(): void;
  /**
   * Whether the caller gave up on the call (an operator around the route
   * unsubscribed): the flow then rolls back rather than record an outcome
   * nobody will be answered with.
   */
  abandonment?: Abandonment;
}

/** Settled by the one-transaction flow; `result` is the handler's own value when it ran and succeeded. */
export type OneTransactionSettled = Settled & { result?: unknown };

/** One call of the flow: what its steps share, from the claim to the answer. */
export interface FlowCall {
  readonly id: RecordId;
  readonly fingerprint: RequestFingerprint;
  readonly terms: OneTransactionTerms;
  /** The route's handler, as Nest's interceptor chain calls it. */
  readonly next: CallHandler;
  /** The connection the claim, the handler and the record share. */
  readonly runner: QueryRunner;
  /** The transaction's isolation level: the call's, else the app's. */
  readonly isolation: IsolationLevel;
  readonly steps: FlowSteps;
  /** Set once the transaction outlives the answer: the runner is then released when the handler settles, not by the flow. */
  handedOver: boolean;
}
