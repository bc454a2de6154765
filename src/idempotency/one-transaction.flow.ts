import { type CallHandler, type HttpException, Inject, Injectable } from '@nestjs/common';
import { performance } from 'node:perf_hooks';
import { lastValueFrom } from 'rxjs';
import type { EntityManager } from 'typeorm';
import { ClaimTransaction } from './claim-transaction.js';
import { CurrentOperation } from './current-operation.js';
import { isLockTimeout } from './database-errors.js';
import { hashKey, IdempotencyEvents } from './events/idempotency-events.js';
import { IdempotencyDataSource } from './idempotency-data-source.js';
import type { ResolvedModuleOptions } from './idempotency.options.js';
import { type ClaimRow, IdempotencyStatements, type LiveRecordRow } from './records/record.statements.js';
import { type RecordId, type RecordRow, toStoredRecord } from './records/stored-record.js';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from './idempotency.tokens.js';
import { captureError } from './outcome-capture.js';
import { OutcomeCodec } from './outcome-codec.js';
import { type FlowEnding, type FlowSteps, type RecordedOutcome, replayable, type Settled } from './recorded-outcome.js';
import { TransactionHost } from './transaction-host.js';

const SAVEPOINT_NAME = 'idempotency_claim';
const SAVEPOINT = `SAVEPOINT ${SAVEPOINT_NAME}`;

/** What the caller decides about one call of the flow: an HTTP route, a GraphQL field, a message handler. */
export interface OneTransactionTerms {
  retention: number;
  wait: number;
  /** The outcome to record for the handler's result. */
  capture(result: unknown): RecordedOutcome;
  /**
   * A failure to record as the outcome, its writes undone back to a
   * savepoint taken after the claim. Absent, every failure rolls back.
   */
  storesError?(error: unknown): error is HttpException;
  /** The error for a key still held by an owner in flight. */
  inProgress(): Error;
  /** The error for a key recorded for a different request; the module's 422 by default. */
  reused?(): Error;
  /** Told whether the claim found the key held. */
  observeHeld?(held: boolean): void;
}

/** Settled by the one-transaction flow; `result` is the handler's own value when it ran and succeeded. */
export type OneTransactionSettled = Settled & { result?: unknown };

/**
 * The one-transaction flow: claim the key, run the handler with the claim's
 * transaction as the current one, record the outcome and commit, before a
 * byte is sent. A claim that finds the key held replays the record instead.
 * It returns what it settled on, or the error to answer, with its steps.
 */
@Injectable()
export class OneTransactionFlow {
  constructor(
    private readonly transactions: TransactionHost,
    private readonly served: IdempotencyDataSource,
    private readonly outcomes: OutcomeCodec,
    private readonly events: IdempotencyEvents,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedModuleOptions,
  ) {}

  async execute(id: RecordId, fingerprint: string, terms: OneTransactionTerms, next: CallHandler): Promise<FlowEnding<OneTransactionSettled>> {
    const steps: FlowSteps = { collided: false, timeline: {} };
    const runner = this.served.dataSource.createQueryRunner();
    let transaction: ClaimTransaction | undefined;
    try {
      const claimStarted = performance.now();
      const claim = IdempotencyStatements.claim(id, fingerprint, terms.retention, terms.wait);
      // The savepoint rides along with the claim; it is only ever rolled back to after a claim that succeeded.
      const begun = await ClaimTransaction.begin<ClaimRow>(runner, this.options, claim, ...(terms.storesError ? [SAVEPOINT] : []))
        .catch((error: unknown) => {
          if (!isLockTimeout(error)) throw error;
          steps.collided = true;
          throw terms.inProgress();
        })
        .finally(() => {
          steps.claimMs = performance.now() - claimStarted;
          steps.timeline.claim = { start: claimStarted, end: performance.now() };
        });
      transaction = begun.transaction;
      const [row] = begun.first.rows;
      terms.observeHeld?.(!row.claimed);
      if (!row.claimed) {
        if (row.fingerprint == null) steps.collided = true;
        return { steps, settled: await this.replayHolder(transaction, id, fingerprint, row.fingerprint == null ? undefined : row, terms) };
      }
      if (row.took_over) steps.tookOver = 'expired';
      const handlerStarted = performance.now();
      const claimed = transaction;
      const handled = await CurrentOperation.run(id, () => this.runHandler(claimed, runner.manager, terms, next)).finally(() => {
        steps.timeline.handler = { start: handlerStarted, end: performance.now() };
      });
      steps.handlerMs = performance.now() - handlerStarted;
      const commitStarted = performance.now();
      await transaction
        .commitWith(IdempotencyStatements.complete(id, this.outcomes.encode(id, handled.outcome)))
        .catch((error: Error) => {
          this.events.emit({ kind: 'commit_failed', operation: id.operation, keyHash: hashKey(id), error: error.message });
          throw error;
        })
        .finally(() => {
          steps.timeline.commit = { start: commitStarted, end: performance.now() };
        });
      return { steps, settled: { ...handled, replayed: false, expiresAt: row.expires_at, databaseNow: row.database_now } };
    } catch (error) {
      await transaction?.rollback();
      return { steps, error };
    } finally {
      await runner.release();
    }
  }

  /**
   * The key is held. A live record the claim's snapshot could see was
   * committed before it; none means an owner committed while the claim
   * waited on its row (a first execution, or a takeover of an expired
   * record), and a fresh read finds what it recorded. Neither read returns an
   * expired record: nothing replays, nor answers 422, from one.
   */
  private async replayHolder(transaction: ClaimTransaction, id: RecordId, fingerprint: string, row: ClaimRow | undefined, terms: OneTransactionTerms): Promise<Settled> {
    const holder = row ?? (await transaction.query<LiveRecordRow>(IdempotencyStatements.readRecord(id))).rows[0];
    await transaction.rollback();
    // An outcome that does not decrypt throws here: it is not replayed, and the claim took nothing over.
    const record = holder && toStoredRecord(holder as RecordRow, id, this.outcomes);
    if (!record?.outcome) throw terms.inProgress();
    return { outcome: replayable(record, fingerprint, terms.reused), replayed: true, expiresAt: record.expiresAt, databaseNow: holder.database_now };
  }

  /**
   * Runs the handler with the claim's transaction as the current one. A
   * failure the terms store undoes the handler's writes only (back to the
   * savepoint after the claim) and becomes the recorded outcome.
   */
  private async runHandler(transaction: ClaimTransaction, manager: EntityManager, terms: OneTransactionTerms, next: CallHandler): Promise<{ outcome: RecordedOutcome; result?: unknown }> {
    try {
      // next.handle() binds the async context, so it is called inside run().
      const result = await this.transactions.run(manager, () => lastValueFrom(next.handle(), { defaultValue: undefined }));
      return { outcome: terms.capture(result), result };
    } catch (error) {
      if (!terms.storesError?.(error)) throw error;
      await transaction.query(`ROLLBACK TO SAVEPOINT ${SAVEPOINT_NAME}`);
      return { outcome: captureError(error) };
    }
  }
}
