import { type CallHandler, type ExecutionContext, Inject, Injectable, type NestInterceptor } from '@nestjs/common';
import { performance } from 'node:perf_hooks';
import { defer, lastValueFrom, map, type Observable, tap } from 'rxjs';
import { ClaimTransaction } from '../claim-transaction.js';
import { CurrentOperation } from '../current-operation.js';
import { isLockTimeout } from '../database-errors.js';
import { type AttemptEvent, type AttemptOutcome, hashKey, IdempotencyEvents } from '../events/idempotency-events.js';
import { IdempotencyDataSource } from '../idempotency-data-source.js';
import { parseIdempotencyKey } from '../idempotency-key.js';
import type { ResolvedModuleOptions } from '../idempotency.options.js';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.tokens.js';
import { IdempotencyRecordUndecryptableException } from '../idempotency.exceptions.js';
import { type ClaimRow, IdempotencyStatements, type RecordId, type RecordRow, toStoredRecord } from '../idempotency.store.js';
import { OutcomeCodec } from '../outcome-codec.js';
import type { RecordedOutcome } from '../recorded-outcome.js';
import { fingerprintRequest } from '../request-fingerprint.js';
import { TransactionHost } from '../transaction-host.js';
import { type IdempotentMessageHandler, IdempotentMessageHandlers } from './idempotent-message.js';
import { MessageInProgressError, MessageKeyMissingError, MessageKeyReusedError } from './message.errors.js';

/** What the flow settled on for one delivery. */
interface SettledMessage {
  result: unknown;
  replayed: boolean;
}

/**
 * The flow of an `@Idempotent()` message handler (`rpc` context), the
 * message twin of the HTTP one-transaction flow: claim the message's key,
 * run the handler with the claim's transaction as the current one, record
 * the outcome, commit. The transport acknowledges after this returns, so a
 * crash between the commit and the ack redelivers the message, which then
 * finds the record complete and replays without running the handler. A
 * failure rolls back, releasing the key, and reaches the transport, which
 * leaves the message unacknowledged for redelivery.
 */
@Injectable()
export class IdempotentMessageInterceptor implements NestInterceptor {
  constructor(
    private readonly handlers: IdempotentMessageHandlers,
    private readonly transactions: TransactionHost,
    private readonly served: IdempotencyDataSource,
    private readonly events: IdempotencyEvents,
    private readonly outcomes: OutcomeCodec,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedModuleOptions,
  ) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const handler = context.getType() === 'rpc' ? this.handlers.of(context.getClass(), context.getHandler()) : undefined;
    if (!handler) return next.handle();
    const rpc = context.switchToRpc();
    const attempt: AttemptEvent = { kind: 'attempt', operation: handler.operation, outcome: 'executed', collided: false };
    return defer(() => this.settle(handler, rpc.getData(), rpc.getContext(), next, attempt)).pipe(
      tap({
        next: ({ replayed }) => this.events.emit({ ...attempt, outcome: replayed ? 'replayed' : 'executed', status: 200 }),
        error: (error: unknown) =>
          this.events.emit({
            ...attempt,
            outcome: outcomeOfError(error),
            ...(error instanceof IdempotencyRecordUndecryptableException && { undecryptable: error.reason }),
          }),
      }),
      map(({ result }) => result),
    );
  }

  private async settle(handler: IdempotentMessageHandler, data: unknown, context: unknown, next: CallHandler, attempt: AttemptEvent): Promise<SettledMessage> {
    const parsed = parseIdempotencyKey([handler.keyOf(data, context) ?? ''].filter(Boolean));
    if (parsed.kind === 'missing') throw new MessageKeyMissingError(handler.operation, 'none found');
    if (parsed.kind === 'malformed') throw new MessageKeyMissingError(handler.operation, parsed.reason);
    const id: RecordId = { scope: handler.scopeOf(data, context), operation: handler.operation, key: parsed.key };
    attempt.keyHash = hashKey(id);
    let fingerprint: string;
    try {
      fingerprint = fingerprintRequest(handler.operation, data ?? null);
    } catch (error) {
      throw new MessageKeyMissingError(handler.operation, `its data has no canonical form: ${(error as Error).message}`);
    }
    const runner = this.served.dataSource.createQueryRunner();
    let transaction: ClaimTransaction | undefined;
    try {
      const claimStarted = performance.now();
      const begun = await ClaimTransaction.begin<ClaimRow>(runner, this.options, IdempotencyStatements.claim(id, fingerprint, handler.retention, handler.wait))
        .catch((error: unknown) => {
          if (!isLockTimeout(error)) throw error;
          attempt.collided = true;
          throw new MessageInProgressError(handler.operation, attempt.keyHash!, Math.max(1000, handler.wait));
        })
        .finally(() => (attempt.claimMs = performance.now() - claimStarted));
      transaction = begun.transaction;
      const [row] = begun.first.rows;
      if (!row.claimed) return await this.replay(transaction, id, fingerprint, row.fingerprint == null ? undefined : row, handler, attempt);
      if (row.took_over) attempt.tookOver = 'expired';
      const handlerStarted = performance.now();
      const result = await CurrentOperation.run(id, () => this.transactions.run(runner.manager, () => lastValueFrom(next.handle(), { defaultValue: undefined })));
      attempt.handlerMs = performance.now() - handlerStarted;
      const outcome: RecordedOutcome = { status: 200, headers: {}, body: result === undefined ? null : JSON.stringify(result) };
      await transaction.commitWith(IdempotencyStatements.complete(id, this.outcomes.encode(id, outcome))).catch((error: Error) => {
        this.events.emit({ kind: 'commit_failed', operation: id.operation, keyHash: attempt.keyHash!, error: error.message });
        throw error;
      });
      return { result, replayed: false };
    } catch (error) {
      await transaction?.rollback();
      throw error;
    } finally {
      await runner.release();
    }
  }

  /** The key is held: replay a complete record, or ask for a redelivery while another delivery still runs. */
  private async replay(transaction: ClaimTransaction, id: RecordId, fingerprint: string, row: ClaimRow | undefined, handler: IdempotentMessageHandler, attempt: AttemptEvent): Promise<SettledMessage> {
    if (!row) attempt.collided = true;
    const holder = row ?? (await transaction.query<RecordRow>(IdempotencyStatements.readRecord(id))).rows[0];
    await transaction.rollback();
    // A record that does not decrypt throws: the transport redelivers later, and nothing is replayed or run.
    const record = holder && toStoredRecord(holder as RecordRow, id, this.outcomes);
    if (!record?.outcome) throw new MessageInProgressError(handler.operation, attempt.keyHash!, Math.max(1000, handler.wait));
    if (record.fingerprint !== fingerprint) throw new MessageKeyReusedError(handler.operation, attempt.keyHash!);
    return { result: record.outcome.body === null ? undefined : JSON.parse(record.outcome.body), replayed: true };
  }
}

function outcomeOfError(error: unknown): AttemptOutcome {
  if (error instanceof MessageKeyMissingError) return 'key_missing';
  if (error instanceof MessageKeyReusedError) return 'key_reused';
  if (error instanceof MessageInProgressError) return 'conflict';
  if (error instanceof IdempotencyRecordUndecryptableException) return 'undecryptable';
  return 'rolled_back';
}
