const ORDER_ID = '0b6f5a8e-3c2d-4f1e-9a7b-5c4d3e2f1a0b';
/** The order view the bench's routes answer, ~165 bytes: the outbox event's payload and the record's body. */
const ORDER_VIEW = JSON.stringify({ id: ORDER_ID, tenant: 'bench', sku: 'bench-sku-1', quantity: 2, note: null, status: 'created', createdAt: '2026-01-01T00:00:00.000Z' });

/** The statements' parameters, as the bench app's `@Idempotent()` route sends them for the demo's order. */
export const PGBENCH_VARIABLES: Readonly<Record<string, string>> = {
  tenant: 'bench',
  sku: 'bench-sku-1',
  scope: 'tenant:bench',
  operation: 'POST /bench/orders/idempotent',
  fingerprint: 'a3f1c9e07b24d5868e1f0c3b7a9d2e4f6b8c0d1e2f3a4b5c6d7e8f9a0b1c2d3e',
  retention_ms: String(24 * 60 * 60 * 1000),
  wait: '1000',
  response_status: '201',
  response_headers: JSON.stringify({ location: `/orders/${ORDER_ID}`, 'content-type': 'application/json; charset=utf-8' }),
  response_body: ORDER_VIEW,
  event_type: 'order.created',
  payload: ORDER_VIEW,
  event_headers: '{}',
  event_index: '0',
  source_key_hash: '5d41402abc4b2a76',
};
