import { type Order, toOrderView, type OrderView } from '../src/demo/orders/order.entity.js';
import { type Payment, toPaymentView, type PaymentView } from '../src/demo/payments/payment.entity.js';
import type { DatabaseReader } from './database.js';
import type { LedgerCharge, ProviderControl } from './provider-control.js';

/** An order, in the shape the API answers with. */
export type OrderRow = OrderView;

/** A payment, in the shape the API answers with. */
export type PaymentRow = PaymentView;

/** One run of the demo's order handler, from its audit (`order_executions`). */
export interface ExecutionRow {
  tenant: string;
  sku: string;
  /** The pid of the instance's process. */
  instance: string;
  /** When it started, in ms since the epoch. */
  startedAt: number;
}

/** The effects the run left: the database's rows and the provider's ledger, read once after recovery. */
export interface Snapshot {
  orders: OrderRow[];
  /** Every run of the order handler, including runs whose request rolled back. */
  executions: ExecutionRow[];
  payments: PaymentRow[];
  /** Outbox events per `type:id of the order or payment`. */
  outboxCounts: Map<string, number>;
  charges: LedgerCharge[];
}

/** Claims still in progress, with what tells why. */
export interface InProgressClaim {
  scope: string;
  operation: string;
  key: string;
  recovery_point: string | null;
  attempts: number;
  lease_expires_at: string | null;
}

/** The claims still in progress now: after recovery, each one is an operation nobody finished. */
export async function inProgressClaims(database: DatabaseReader): Promise<InProgressClaim[]> {
  return database.query<InProgressClaim>(
    `SELECT scope, operation, key, recovery_point, attempts, lease_expires_at::text FROM idempotency_records WHERE status = 'in_progress'`,
  );
}

/** Reads every order, order handler run, payment and outbox count of the run database, and the provider's ledger. */
export async function takeSnapshot(database: DatabaseReader, provider: ProviderControl): Promise<Snapshot> {
  // Read in the entities' shape and turned into views by the app's own functions, so rows and bodies compare as equal.
  const orders = await database.query<Order>(`SELECT id, tenant, sku, quantity, note, status, created_at AS "createdAt" FROM orders`);
  const payments = await database.query<Payment>(
    `SELECT id, order_id AS "orderId", tenant, amount_cents AS "amountCents", currency, status,
            provider_charge_id AS "providerChargeId", created_at AS "createdAt", captured_at AS "capturedAt" FROM payments`,
  );
  const executions = await database.query<Omit<ExecutionRow, 'startedAt'> & { startedAt: Date }>(`SELECT tenant, sku, instance, started_at AS "startedAt" FROM order_executions ORDER BY id`);
  const outbox = await database.query<{ event: string; count: number }>(
    `SELECT type || ':' || (payload->>'id') AS event, count(*)::int AS count FROM idempotency_outbox GROUP BY 1`,
  );
  return {
    orders: orders.map(toOrderView),
    executions: executions.map((row) => ({ ...row, startedAt: row.startedAt.getTime() })),
    payments: payments.map(toPaymentView),
    outboxCounts: new Map(outbox.map((row) => [row.event, row.count])),
    charges: await provider.ledger(),
  };
}
