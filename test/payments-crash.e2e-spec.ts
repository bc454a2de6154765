import { setTimeout as sleep } from 'node:timers/promises';
import { startFakePaymentProvider, type FakePaymentProvider } from '../src/demo/payment-provider/fake-payment-provider.js';
import { ACME, chargesOf, createOrder, setFault } from './support/demo.js';
import { type DemoProcess, startDemoProcess } from './support/demo-process.js';
import { HTTP_ADAPTERS } from './support/http-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

/**
 * The app process is SIGKILLed after the provider charged and before the
 * payment was captured: the case no database transaction covers.
 */
describe.each(HTTP_ADAPTERS)('a crash between the external charge and the final commit (%s)', (adapter) => {
  let db: TestDatabase;
  let provider: FakePaymentProvider;
  const demos: DemoProcess[] = [];
  const start = async (reaperIntervalMs: number) => {
    const demo = await startDemoProcess({
      DATABASE_URL: db.url,
      PAYMENT_PROVIDER_URL: provider.url,
      PAYMENT_PROVIDER_TIMEOUT_MS: '60000',
      IDEMPOTENCY_LEASE_MS: '1000',
      REAPER_INTERVAL_MS: String(reaperIntervalMs),
      HTTP_ADAPTER: adapter,
    });
    demos.push(demo);
    return demo;
  };
  const pay = (url: string, orderId: string, key: string, amountCents: number) =>
    fetch(`${url}/orders/${orderId}/payments`, {
      method: 'POST',
      headers: { authorization: ACME, 'idempotency-key': key, 'content-type': 'application/json' },
      body: JSON.stringify({ amountCents, currency: 'EUR' }),
    });

  /** Starts a payment whose charge lands at the provider, then kills the app before it hears back. */
  const crashAfterCharge = async (demo: DemoProcess, orderId: string, key: string, amountCents: number) => {
    await setFault(provider.url, amountCents, 'charge-then-hang');
    const inFlight = pay(demo.url, orderId, key, amountCents).catch(() => undefined);
    for (let i = 0; i < 200 && (await chargesOf(provider.url, amountCents)).length === 0; i++) await sleep(25);
    expect(await chargesOf(provider.url, amountCents)).toHaveLength(1);
    await demo.kill();
    await inFlight;
    expect(await db.query(`SELECT status, recovery_point FROM idempotency_records WHERE key = $1`, [key])).toEqual([
      { status: 'in_progress', recovery_point: 'record-pending' },
    ]);
  };
  const expectExactlyOneCapturedPayment = async (orderId: string, amountCents: number) => {
    const charges = await chargesOf(provider.url, amountCents);
    expect(charges).toHaveLength(1);
    const payments = await db.query<{ id: string }>(`SELECT id, status, provider_charge_id FROM payments WHERE order_id = $1`, [orderId]);
    expect(payments).toEqual([expect.objectContaining({ status: 'captured', provider_charge_id: charges[0].id })]);
    expect(await db.query(`SELECT 1 FROM idempotency_outbox WHERE type = 'payment.captured' AND payload->>'id' = $1`, [payments[0].id])).toHaveLength(1);
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    provider = await startFakePaymentProvider();
  });
  afterAll(async () => {
    for (const demo of demos) if (demo.child.exitCode === null && demo.child.signalCode === null) await demo.kill();
    await provider?.close();
    await db?.drop();
  });

  it('leads, on retry, to exactly one charge and one captured payment', async () => {
    const first = await start(0);
    const orderId = await createOrder(first.url, 'crash-retry');
    await crashAfterCharge(first, orderId, 'crash-retry-key', 1700);

    const second = await start(0);
    let retry = await pay(second.url, orderId, 'crash-retry-key', 1700);
    // The dead owner's lease (1 s) must lapse before the retry can take over.
    for (let i = 0; i < 50 && retry.status === 409; i++) {
      await sleep(100);
      retry = await pay(second.url, orderId, 'crash-retry-key', 1700);
    }
    expect(retry.status).toBe(201);
    const body = await retry.json();
    expect(body).toMatchObject({ status: 'captured', amountCents: 1700 });
    await expectExactlyOneCapturedPayment(orderId, 1700);
    const replay = await pay(second.url, orderId, 'crash-retry-key', 1700);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(await replay.json()).toEqual(body);
    await second.stop();
  });

  it('is finished by the reaper of a restarted instance when no client retries', async () => {
    const first = await start(0);
    const orderId = await createOrder(first.url, 'crash-reaper');
    await crashAfterCharge(first, orderId, 'crash-reaper-key', 1800);

    const second = await start(200);
    let status = 'in_progress';
    for (let i = 0; i < 100 && status === 'in_progress'; i++) {
      await sleep(100);
      [{ status }] = await db.query<{ status: string }>(`SELECT status FROM idempotency_records WHERE key = 'crash-reaper-key'`);
    }
    expect(status).toBe('completed');
    await expectExactlyOneCapturedPayment(orderId, 1800);
    const retry = await pay(second.url, orderId, 'crash-reaper-key', 1800);
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    await second.stop();
  });
});
