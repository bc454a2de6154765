import { describeOperation, type Operation } from './operations.js';
import type { Snapshot } from './snapshot.js';
import { type InvariantResult, Tally } from './tally.js';

/**
 * No client is told a final failure for an operation whose effect happened.
 * A send that stopped at an answer the client takes as final (not one it
 * retries: 409, 503) with an error other than the operation's expected
 * status, while the operation's order, payment row or provider charge
 * exists, is a lost acknowledgement in the making: a caller that believes
 * it and tries again with a new key does the work twice.
 */
export function checkFinalAnswers(operations: readonly Operation[], snapshot: Snapshot): InvariantResult {
  const tally = new Tally(
    'no final failure for an effect that happened',
    'no send stops at a final error answer (anything the client does not retry) for an operation whose order, payment or provider charge exists',
  );
  const orders = new Set(snapshot.orders.map((order) => `${order.tenant}|${order.sku}`));
  const payments = new Set(snapshot.payments.map((payment) => payment.amountCents));
  const charges = new Set(snapshot.charges.map((charge) => charge.amountCents));
  const effectOf = (op: Operation): string | undefined => {
    if (op.effect === 'order') return orders.has(`${op.tenant}|${op.sku}`) ? 'its order exists' : undefined;
    if (op.effect !== 'payment') return undefined;
    if (charges.has(op.amountCents!)) return 'the provider charged it';
    return payments.has(op.amountCents!) ? 'its payment row exists' : undefined;
  };
  for (const op of operations) {
    const effect = effectOf(op);
    if (op.skipped || !effect) continue;
    for (const send of op.sends) {
      if (send.stoppedBy !== 'answered' || send.status === undefined || send.status < 400 || send.status === op.expectedStatus) continue;
      tally.fail(`${describeOperation(op)}, ${send.phase} copy ${send.copy}: told ${send.status} after ${send.attempts} attempt(s), yet ${effect}`);
    }
  }
  return tally.done;
}
