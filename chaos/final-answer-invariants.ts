import type { AttemptLog } from './attempt-log.js';
import { describeOperation, type Operation } from './operations.js';
import type { Snapshot } from './snapshot.js';
import { type InvariantResult, Tally } from './tally.js';

/**
 * No client is told a final failure for an operation whose effect happened.
 * A send that stopped at an answer the client takes as final (not one it
 * retries: 409, 503) with an error other than the operation's expected
 * status, while the operation's order, payment row or provider charge
 * existed before the operation's verification re-send, is a lost
 * acknowledgement in the making: a caller that believes it and tries again
 * with a new key does the work twice.
 */
export function checkFinalAnswers(operations: readonly Operation[], log: AttemptLog, snapshot: Snapshot): InvariantResult {
  const tally = new Tally(
    'no final failure for an effect that happened',
    'no send stops at a final error answer (anything the client does not retry) for an operation whose order, payment or provider charge existed before its verification re-send',
  );
  const earliest = (times: Map<string | number, number>, key: string | number, at: string) => times.set(key, Math.min(times.get(key) ?? Infinity, Date.parse(at)));
  const orders = new Map<string | number, number>();
  for (const order of snapshot.orders) earliest(orders, `${order.tenant}|${order.sku}`, order.createdAt);
  const payments = new Map<string | number, number>();
  for (const payment of snapshot.payments) earliest(payments, payment.amountCents, payment.createdAt);
  const charges = new Map<string | number, number>();
  for (const charge of snapshot.charges) earliest(charges, charge.amountCents, charge.createdAt);
  /** What existed before `before`: effects the verification re-send made itself do not count. */
  const effectOf = (op: Operation, before: number): string | undefined => {
    if (op.effect === 'order') return (orders.get(`${op.tenant}|${op.sku}`) ?? Infinity) < before ? 'its order exists' : undefined;
    if (op.effect !== 'payment') return undefined;
    if ((charges.get(op.amountCents!) ?? Infinity) < before) return 'the provider charged it';
    return (payments.get(op.amountCents!) ?? Infinity) < before ? 'its payment row exists' : undefined;
  };
  for (const op of operations) {
    if (op.skipped) continue;
    const verifyStarted = Math.min(...log.of(op.id).filter((attempt) => attempt.phase === 'verify').map((attempt) => attempt.startedAt));
    const effect = effectOf(op, verifyStarted);
    if (!effect) continue;
    for (const send of op.sends) {
      if (send.phase !== 'traffic' || send.stoppedBy !== 'answered' || send.status === undefined || send.status < 400 || send.status === op.expectedStatus) continue;
      tally.fail(`${describeOperation(op)}, copy ${send.copy}: told ${send.status} after ${send.attempts} attempt(s), yet ${effect}`);
    }
  }
  return tally.done;
}
