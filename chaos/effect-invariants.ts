import type { AttemptLog, AttemptRecord } from './attempt-log.js';
import { describeOperation, type Operation } from './operations.js';
import type { Snapshot } from './snapshot.js';
import { differingFields, type InvariantResult, parseBody, Tally } from './tally.js';

const orderKey = (tenant: string, sku: string) => `${tenant}|${sku}`;
const countBy = <T>(items: readonly T[], key: (item: T) => string | number) => {
  const counts = new Map<string | number, T[]>();
  for (const item of items) counts.set(key(item), [...(counts.get(key(item)) ?? []), item]);
  return counts;
};

/**
 * What the run left behind, held against what the clients sent and were
 * told: no duplicate effect, no effect without an operation, the outbox in
 * step with its rows, no lost acknowledgement, no answer across tenants.
 */
export function checkEffects(operations: readonly Operation[], log: AttemptLog, snapshot: Snapshot): InvariantResult[] {
  const duplicates = new Tally('zero duplicate effects', 'at most one order, one payment row, one captured payment and one provider charge per logical operation');
  const orphans = new Tally('no effect without an operation', 'every order, payment and charge traces back to an operation the clients sent');
  const outbox = new Tally('outbox in step', 'exactly one order.created per order and one payment.captured per captured payment, none for others');
  const lost = new Tally('zero lost acknowledgements', 'every acknowledged order or payment exists with the acknowledged content');
  const crossTenant = new Tally('zero cross-tenant replays', "no response to tenant X's request carries tenant Y's order or payment");

  const orderOps = new Map(operations.filter((op) => op.effect === 'order').map((op) => [orderKey(op.tenant, op.sku!), op]));
  const paymentOps = new Map(operations.filter((op) => op.effect === 'payment').map((op) => [op.amountCents!, op]));

  for (const [key, orders] of countBy(snapshot.orders, (order) => orderKey(order.tenant, order.sku))) {
    if (!orderOps.has(key as string)) orphans.fail(`order(s) ${orders.map((o) => o.id).join(', ')} for ${key}, which no operation created`);
    else if (orders.length > 1) duplicates.fail(`operation ${orderOps.get(key as string)!.id}: ${orders.length} orders (${orders.map((o) => o.id).join(', ')})`);
  }
  for (const [amount, payments] of countBy(snapshot.payments, (payment) => payment.amountCents)) {
    const op = paymentOps.get(amount as number);
    if (!op) orphans.fail(`payment(s) ${payments.map((p) => p.id).join(', ')} of ${amount} cents, which no operation made`);
    else if (payments.length > 1) {
      const captured = payments.filter((p) => p.status === 'captured').length;
      duplicates.fail(`operation ${op.id}: ${payments.length} payment rows, ${captured} captured`);
    }
  }
  for (const [amount, charges] of countBy(snapshot.charges, (charge) => charge.amountCents)) {
    const op = paymentOps.get(amount as number);
    if (!op) orphans.fail(`charge(s) ${charges.map((c) => c.id).join(', ')} of ${amount} cents, which no operation made`);
    else if (charges.length > 1) duplicates.fail(`operation ${op.id}: ${charges.length} provider charges (${charges.map((c) => c.id).join(', ')})`);
  }

  for (const order of snapshot.orders) {
    const events = snapshot.outboxCounts.get(`order.created:${order.id}`) ?? 0;
    if (events !== 1) outbox.fail(`order ${order.id}: ${events} order.created events`);
  }
  for (const payment of snapshot.payments) {
    const events = snapshot.outboxCounts.get(`payment.captured:${payment.id}`) ?? 0;
    if (events !== (payment.status === 'captured' ? 1 : 0)) outbox.fail(`payment ${payment.id} (${payment.status}): ${events} payment.captured events`);
  }

  const ordersById = new Map(snapshot.orders.map((order) => [order.id, order]));
  const paymentsById = new Map(snapshot.payments.map((payment) => [payment.id, payment]));
  const chargesById = new Map(snapshot.charges.map((charge) => [charge.id, charge]));
  /** Why an acknowledged answer does not match the state, or undefined when it does. */
  const ackProblem = (op: Operation, attempt: AttemptRecord): string | undefined => {
    const body = parseBody(attempt.body);
    if (!body) return 'the body is not a JSON object';
    if (op.effect === 'order') {
      const row = ordersById.get(String(body.id));
      if (!row) return `order ${String(body.id)} does not exist`;
      const asked = { sku: op.body.sku, quantity: op.body.quantity, note: op.body.note ?? null };
      const wrong = [...differingFields(body, { ...row }), ...differingFields({ sku: row.sku, quantity: row.quantity, note: row.note }, asked)];
      if (attempt.location !== `/orders/${row.id}`) wrong.push(`Location (${attempt.location ?? 'none'})`);
      return wrong.length ? `order ${row.id} differs in ${wrong.join(', ')}` : undefined;
    }
    const view = (attempt.status === 402 ? body.payment : body) as Record<string, unknown> | undefined;
    const row = view && paymentsById.get(String(view.id));
    if (!row) return `payment ${String(view?.id)} does not exist`;
    const wrong = differingFields(view!, { ...row });
    if (wrong.length) return `payment ${row.id} differs in ${wrong.join(', ')}`;
    const charge = row.providerChargeId ? chargesById.get(row.providerChargeId) : undefined;
    const expectedStatus = attempt.status === 402 ? 'declined' : 'captured';
    if (row.status !== expectedStatus) return `payment ${row.id} is ${row.status}, not ${expectedStatus}`;
    if (row.amountCents !== op.amountCents || !op.path.includes(row.orderId)) return `payment ${row.id} is for another amount or order`;
    if (!charge || charge.reference !== row.id || charge.amountCents !== row.amountCents) return `payment ${row.id} has no matching provider charge`;
    return undefined;
  };

  for (const op of operations) {
    if (op.effect === 'none') continue;
    for (const attempt of log.of(op.id)) {
      if (attempt.status !== op.expectedStatus) continue;
      const problem = ackProblem(op, attempt);
      if (problem) lost.fail(`${describeOperation(op)}, ${attempt.phase} copy ${attempt.copy} attempt ${attempt.attempt}: ${problem}`);
      const body = parseBody(attempt.body);
      const tenant = (attempt.status === 402 ? (body?.payment as Record<string, unknown> | undefined) : body)?.tenant;
      const owner = op.effect === 'order' ? ordersById.get(String(body?.id))?.tenant : undefined;
      if (tenant !== op.tenant || (owner !== undefined && owner !== op.tenant)) {
        crossTenant.fail(`${describeOperation(op)} was answered with ${String(tenant)}'s ${op.effect} ${String(body?.id)}`);
      }
    }
  }
  for (const op of operations.filter((candidate) => candidate.kind === 'cross-tenant' && candidate.tenant === 'acme')) {
    const idOf = (id: string) => parseBody(log.of(id).find((attempt) => attempt.status === 201)?.body)?.id;
    const [acme, globex] = [idOf(op.id), idOf(`${op.id}-globex`)];
    if (acme !== undefined && acme === globex) crossTenant.fail(`operation ${op.id}: both tenants were answered with order ${String(acme)}`);
  }
  return [duplicates.done, orphans.done, outbox.done, lost.done, crossTenant.done];
}
