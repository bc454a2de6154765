import { type CallHandler, type ExecutionContext, Injectable } from '@nestjs/common';
import type { Observable } from 'rxjs';
import { type AttemptErrors, attemptEvent } from '../events/attempt-event.js';
import { hashKey } from '../events/idempotency-events.js';
import { parseIdempotencyKey } from '../http/idempotency-key.js';
import { IdempotencyRecordUndecryptableException } from '../errors/idempotency.exceptions.js';
import { IdempotencyFacade } from '../http/idempotency.facade.js';
import type { RecordId } from '../records/stored-record.js';
import type { OneTransactionSettled, OneTransactionTerms } from '../flow/one-transaction.terms.js';
import { type FlowEnding, NO_STEPS, type RecordedOutcome } from '../outcome/recorded-outcome.js';
import { canonicalRequest } from '../fingerprint/request-fingerprint.js';
import type { RequestFingerprint, RequestFingerprints } from '../fingerprint/request-fingerprints.js';
import { settling } from '../http/settling.js';
import { type IdempotentMessageHandler, IdempotentMessageHandlers } from './idempotent-message.js';
import { type IdempotentCallType, IdempotencyExtensions } from '../http/idempotency-extensions.js';
import { MessageInProgressError, MessageKeyMissingError, MessageKeyReusedError } from './message.errors.js';

/**
 * `@Idempotent()` on a message handler (`rpc` context), through the same
 * one-transaction flow as a route: claim the message's key, run the handler
 * with the claim's transaction as the current one, record its result as
 * JSON, commit. The transport acknowledges after this returns, so a crash
 * between the commit and the ack redelivers the message, which then finds
 * the record complete and replays without running the handler. A failure
 * rolls back, releasing the key, and reaches the transport, which leaves the
 * message unacknowledged for redelivery.
 *
 * `IdempotencyInterceptor`, the one interceptor `@Idempotent()` binds,
 * hands it the calls of message handlers, once it registered for them.
 */
@Injectable()
export class IdempotentMessageInterceptor implements IdempotentCallType {
  constructor(
    private readonly idempotency: IdempotencyFacade,
    private readonly handlers: IdempotentMessageHandlers,
    extensions: IdempotencyExtensions,
  ) {
    extensions.registerCallType('rpc', this);
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const handler = this.handlers.of(context.getClass(), context.getHandler());
    if (!handler) return next.handle();
    const rpc = context.switchToRpc();
    const { oneTransaction, events } = this.idempotency;
    return settling(async () => {
      let id: RecordId | undefined;
      let ending: FlowEnding<OneTransactionSettled>;
      try {
        id = idOf(handler, rpc.getData(), rpc.getContext());
        ending = await oneTransaction.execute(id, fingerprintOf(handler, this.idempotency.fingerprints, id, rpc.getData()), termsOf(handler, hashKey(id)), next);
      } catch (error) {
        ending = { steps: NO_STEPS, error };
      }
      // A delivery's event has no HTTP status for an error, and no timeline.
      events.emit(attemptEvent({ operation: handler.operation, id }, ending, ending.error, MESSAGE_ERRORS));
      const { settled } = ending;
      if (!settled) throw ending.error;
      return settled.replayed ? (settled.outcome.body === null ? undefined : JSON.parse(settled.outcome.body)) : settled.result;
    });
  }
}

function idOf(handler: IdempotentMessageHandler, data: unknown, context: unknown): RecordId {
  const parsed = parseIdempotencyKey([handler.keyOf(data, context) ?? ''].filter(Boolean));
  if (parsed.kind === 'missing') throw new MessageKeyMissingError(handler.operation, 'none found');
  if (parsed.kind === 'malformed') throw new MessageKeyMissingError(handler.operation, parsed.reason);
  return { scope: handler.scopeOf(data, context), operation: handler.operation, key: parsed.key };
}

function fingerprintOf(handler: IdempotentMessageHandler, fingerprints: RequestFingerprints, id: RecordId, data: unknown): RequestFingerprint {
  let canonical: string;
  try {
    canonical = canonicalRequest(handler.operation, data ?? null);
  } catch (error) {
    throw new MessageKeyMissingError(handler.operation, `its data has no canonical form: ${(error as Error).message}`);
  }
  return fingerprints.of(id, canonical);
}

/** A message handler's terms: its result recorded as JSON, and the transport's errors for a held or reused key. */
function termsOf(handler: IdempotentMessageHandler, keyHash: string): OneTransactionTerms {
  return {
    retention: handler.retention,
    wait: handler.wait,
    capture: (result): RecordedOutcome => ({ status: 200, headers: {}, body: result === undefined ? null : JSON.stringify(result) }),
    inProgress: () => new MessageInProgressError(handler.operation, keyHash, Math.max(1000, handler.wait)),
    reused: () => new MessageKeyReusedError(handler.operation, keyHash),
  };
}

/** A delivery's errors: the transport's own for its key, or the handler's. */
const MESSAGE_ERRORS: AttemptErrors = {
  outcomeOf(error) {
    if (error instanceof MessageKeyMissingError) return 'key_missing';
    if (error instanceof MessageKeyReusedError) return 'key_reused';
    if (error instanceof MessageInProgressError) return 'conflict';
    if (error instanceof IdempotencyRecordUndecryptableException) return 'undecryptable';
    return 'rolled_back';
  },
};
