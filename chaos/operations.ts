import type { StopReason } from '../src/client/index.js';
import type { SeededRandom } from './random.js';

/** The demo's documented API keys, by tenant. */
export const API_KEYS = { acme: 'demo-key-acme', globex: 'demo-key-globex' } as const;
/** A tenant of the demo. */
export type Tenant = keyof typeof API_KEYS;
/** Every tenant, for seeded picks. */
export const TENANTS = Object.keys(API_KEYS) as Tenant[];

/**
 * What a logical operation is for:
 * `create` a plain order; `burst` an order sent as concurrent copies to
 * several instances; `key-reuse` an order whose key is then reused by
 * `key-reuse-conflict` with another body (422 expected); `cross-tenant` one
 * of two orders sent under the same key by two tenants; `payment-order` the
 * order a `payment` then charges through the fake provider.
 */
export type OperationKind = 'create' | 'burst' | 'key-reuse' | 'key-reuse-conflict' | 'cross-tenant' | 'payment-order' | 'payment';
/** Every kind, in report order. */
export const OPERATION_KINDS: readonly OperationKind[] = ['create', 'burst', 'key-reuse', 'key-reuse-conflict', 'cross-tenant', 'payment-order', 'payment'];

/** What the fake provider is told to do with the operation's first charge (by its unique amount). */
export type ProviderFault = 'none' | 'fail' | 'hang' | 'charge-then-hang' | 'decline';

/** One `client.send` of an operation: a copy during traffic, or the final re-send of the verification pass. */
export interface SendSummary {
  copy: number;
  phase: 'traffic' | 'verify';
  stoppedBy: StopReason;
  attempts: number;
  status?: number;
  error?: string;
}

/**
 * One logical operation: one key, one body, possibly sent as several
 * concurrent copies. Its body is unique in the run (the sku, or the amount
 * of a payment, holds the operation's number), so the effects in the
 * database and the provider's ledger can be traced back to it.
 */
export interface Operation {
  id: string;
  kind: OperationKind;
  tenant: Tenant;
  key: string;
  path: string;
  body: Record<string, unknown>;
  copies: number;
  /** The final answer it must get: 201, 422 for a reused key, 402 for a declined charge. */
  expectedStatus: number;
  /** What it writes, if it runs: an order (found by tenant and sku) or a payment (found by amount). */
  effect: 'order' | 'payment' | 'none';
  sku?: string;
  amountCents?: number;
  providerFault: ProviderFault;
  sends: SendSummary[];
  /** Why it was never sent (its scenario's first step was not acknowledged). */
  skipped?: string;
}

/** How reports name an operation: its id, kind, tenant and, for a payment, the provider fault it drew. */
export function describeOperation(op: Operation): string {
  return `operation ${op.id} (${op.kind}, ${op.tenant}${op.providerFault === 'none' ? '' : `, provider ${op.providerFault}`})`;
}

/** The weights of the traffic mix, per scenario. */
export const SCENARIO_WEIGHTS = [
  ['create', 40],
  ['burst', 20],
  ['key-reuse', 10],
  ['cross-tenant', 10],
  ['payment', 20],
] as const;
/** A scenario a worker runs: one or more operations. */
export type ScenarioKind = (typeof SCENARIO_WEIGHTS)[number][0];

const PROVIDER_FAULT_WEIGHTS = [
  ['none', 50],
  ['fail', 15],
  ['hang', 10],
  ['charge-then-hang', 15],
  ['decline', 10],
] as const;
const CURRENCIES = ['EUR', 'USD', 'GBP', 'CHF', 'JPY'] as const;

/** A new order operation of scenario `n`; `part` tells apart the operations of one scenario. */
export function orderOperation(runTag: string, n: number, part: string, kind: OperationKind, tenant: Tenant, random: SeededRandom): Operation {
  const sku = `chaos-${runTag}-${n}${part}`;
  const body: Record<string, unknown> = { sku, quantity: random.int(1, 1000) };
  if (random.chance(0.7)) body.note = `chaos ${kind} ${n}${part} ${random.int(0, 1e9).toString(36)}`;
  return {
    id: `${n}${part}`,
    kind,
    tenant,
    key: `chaos-${runTag}-${n}${part}-${random.int(0, 1e9).toString(36)}`,
    path: '/orders',
    body,
    copies: 1,
    expectedStatus: 201,
    effect: 'order',
    sku,
    providerFault: 'none',
    sends: [],
  };
}

/** The same key as `first`, with another quantity: a different request, so 422. */
export function conflictingOperation(first: Operation): Operation {
  const quantity = ((first.body.quantity as number) % 1000) + 1;
  return { ...first, id: `${first.id}-conflict`, kind: 'key-reuse-conflict', body: { ...first.body, quantity }, expectedStatus: 422, effect: 'none', sends: [] };
}

/** A payment of a created order, for an amount no other operation of the run uses. */
export function paymentOperation(runTag: string, n: number, order: Operation, orderId: string, random: SeededRandom): Operation {
  const amountCents = 1000 + n;
  const providerFault = random.weighted(PROVIDER_FAULT_WEIGHTS);
  return {
    id: `${n}pay`,
    kind: 'payment',
    tenant: order.tenant,
    key: `chaos-${runTag}-${n}pay-${random.int(0, 1e9).toString(36)}`,
    path: `/orders/${orderId}/payments`,
    body: { amountCents, currency: random.pick(CURRENCIES) },
    copies: random.chance(0.3) ? random.int(2, 3) : 1,
    expectedStatus: providerFault === 'decline' ? 402 : 201,
    effect: 'payment',
    amountCents,
    providerFault,
    sends: [],
  };
}
