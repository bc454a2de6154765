import { setTimeout as sleep } from 'node:timers/promises';
import { startFakePaymentProvider, type FakePaymentProvider } from '../src/demo/payment-provider/fake-payment-provider.js';
import { IdempotencyProblemType } from '../src/idempotency/index.js';
import { AdminProblemType, tenantScope } from '../src/idempotency/admin/index.js';
import { ACME, chargesOf, createOrder, setFault } from './support/demo.js';
import { type DemoProcess, startDemoProcess } from './support/demo-process.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

const PAYMENTS = 'POST /orders/:id/payments';
/** What the admin says instead of the way around its refusal that charged customers twice. */
const NO_WAY_AROUND = /fail(ed)?[^.]*,? (then|and then) release/i;

/**
 * The operator's path to a second side effect, on the demo: a payment whose
 * charge went through but whose answer never came is marked failed, then its
 * key released, and the client's retry charges the customer again. A release
 * of a record whose operation may have reached outside the database now
 * needs `force`, and says what a retry will do.
 */
describe('releasing a key whose operation had external effects, on the demo', () => {
  let db: TestDatabase;
  let provider: FakePaymentProvider;
  let demo: DemoProcess;

  const pay = (orderId: string, key: string, amountCents: number) =>
    fetch(`${demo.url}/orders/${orderId}/payments`, {
      method: 'POST',
      headers: { authorization: ACME, 'idempotency-key': key, 'content-type': 'application/json' },
      body: JSON.stringify({ amountCents, currency: 'EUR' }),
    });
  const admin = async (action: string, body: object, adminKey = 'demo-admin-key') => {
    const response = await fetch(`${demo.url}/admin/idempotency/api/${action}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> & { type?: string; detail?: string } };
  };
  const paymentsOf = (orderId: string) => db.query(`SELECT id FROM payments WHERE order_id = $1`, [orderId]);
  /** The admin's audit lines the demo logged, one per array item. */
  const auditLines = () => demo.output().split('\n').filter((line) => line.includes('admin: '));

  beforeAll(async () => {
    db = await createTestDatabase();
    provider = await startFakePaymentProvider();
    // The provider's answer is given up on after 1 s; the phased route then answers 503 with its lease released.
    demo = await startDemoProcess({ DATABASE_URL: db.url, PAYMENT_PROVIDER_URL: provider.url, PAYMENT_PROVIDER_TIMEOUT_MS: '1000', IDEMPOTENCY_LEASE_MS: '1000', REAPER_INTERVAL_MS: '0' });
  }, 60_000);
  afterAll(async () => {
    await demo?.stop();
    await provider?.close();
    await db?.drop();
  });

  it('charges once and records one payment when an operator fails the payment then releases it; only a forced release lets the retry charge again', async () => {
    const orderId = await createOrder(demo.url, 'release-why-1');
    await setFault(provider.url, 1700, 'charge-then-hang');
    expect((await pay(orderId, 'pay-1', 1700)).status).toBe(503);
    expect(await chargesOf(provider.url, 1700)).toHaveLength(1);
    const id = { scope: tenantScope('acme'), operation: PAYMENTS, key: 'pay-1' };

    // Its lease was released with the 503; a lapse on the database's clock may still be a moment away.
    let refused = await admin('release', { ...id, reason: 'customer retries' });
    for (let i = 0; i < 50 && refused.body.type === AdminProblemType.LeaseLive; i++) {
      await sleep(100);
      refused = await admin('release', { ...id, reason: 'customer retries' });
    }
    expect(refused).toMatchObject({ status: 409, body: { type: AdminProblemType.OperationStarted } });
    expect(refused.body.detail).toContain('record-pending');
    expect(refused.body.detail).toMatch(/each effect happens a second time/);
    expect(refused.body.detail).not.toMatch(NO_WAY_AROUND);

    expect((await admin('fail', { ...id, reason: 'provider timed out' })).status).toBe(200);
    const afterFail = await admin('release', { ...id, reason: 'customer retries' });
    expect(afterFail).toMatchObject({ status: 409, body: { type: AdminProblemType.OperationStarted } });
    expect(afterFail.body.detail).toMatch(/force/);
    expect(afterFail.body.detail).not.toMatch(NO_WAY_AROUND);

    const retry = await pay(orderId, 'pay-1', 1700);
    expect(retry.status).toBe(500);
    expect(((await retry.json()) as { type: string }).type).toBe(IdempotencyProblemType.OperationFailed);
    expect(await chargesOf(provider.url, 1700)).toHaveLength(1);
    expect(await paymentsOf(orderId)).toHaveLength(1);

    // Forced, with a reason: the operator was told that a retry charges again, and it does.
    expect((await admin('release', { ...id, force: true, reason: '' })).status).toBe(400);
    const forced = await admin('release', { ...id, force: true, reason: 'first charge refunded at the provider' });
    expect(forced).toMatchObject({ status: 200, body: { action: 'release', forced: true, effects: { operation: 'capture-payment', phases: ['record-pending'], external: true } } });
    expect(auditLines().filter((line) => line.includes('force-released'))).toEqual([
      expect.stringMatching(/admin: "operator \(admin key #[0-9a-f]{8}\)" force-released "POST \/orders\/:id\/payments" key#[0-9a-f]{16}, reason "first charge refunded at the provider"$/),
    ]);
    expect((await pay(orderId, 'pay-1', 1700)).status).toBe(201);
    expect(await chargesOf(provider.url, 1700)).toHaveLength(2);
  });

  it('needs force to release an order whose outbox event is out of the database\'s hands, and says that its writes stay', async () => {
    const key = `order-${Date.now()}`;
    const order = await fetch(`${demo.url}/orders`, { method: 'POST', headers: { authorization: ACME, 'idempotency-key': key, 'content-type': 'application/json' }, body: JSON.stringify({ sku: 'atlas', quantity: 1 }) });
    expect(order.status).toBe(201);
    const id = { scope: tenantScope('acme'), operation: 'POST /orders', key };
    await db.query(`UPDATE idempotency_outbox SET status = 'sent', settled_at = now(), attempts = 1 WHERE type = 'order.created' AND payload->>'id' = $1`, [((await order.json()) as { id: string }).id]);

    const detail = await fetch(`${demo.url}/admin/idempotency/api/record?${new URLSearchParams(id)}`, { headers: { authorization: 'Bearer demo-admin-key' } });
    expect(((await detail.json()) as { effects: unknown }).effects).toEqual({ operation: null, phases: [], recoveryPoint: null, events: { sent: 1, pending: 0, dead: 0 }, external: true });
    const refused = await admin('release', { ...id, reason: 'customer changes the quantity' });
    expect(refused).toMatchObject({ status: 409, body: { type: AdminProblemType.OperationStarted, detail: expect.stringContaining('1 sent') } });
    expect(refused.body.detail).toMatch(/writes stay/);
    expect((await admin('release', { ...id, force: true, reason: 'customer changes the quantity' })).status).toBe(200);
  });

  it('writes the audit line of a refused action with every field from the request quoted, and validates event ids before any line', async () => {
    // An acme-only operator names a record whose operation reads as the end of a line and a line of another operator's.
    const forged = 'POST /orders key#0000000000000000, reason "x"\nadmin: "root (admin key #00000000)" released POST /orders';
    const refused = await admin('release', { scope: tenantScope('acme'), operation: forged, key: 'k', reason: 'looking' }, 'demo-acme-admin-key');
    expect(refused.status).toBe(404);
    // Each audit line is the logger's own, naming the operator who acted: none begins inside another's text.
    const lines = auditLines();
    expect(lines.filter((line) => !/WARN \[Idempotency\] admin: "operator \(admin key #[0-9a-f]{8}\)" /.test(line))).toEqual([]);
    expect(lines).toContainEqual(expect.stringContaining(`refused to release ${JSON.stringify(forged)} key#`));

    const malformed = 'not-an-id\nadmin: "root" requeued 1 dead letter';
    expect((await admin('requeue', { ids: [malformed], reason: 'broker fixed' })).status).toBe(400);
    expect(demo.output()).not.toContain('not-an-id');
  });
});
