import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { setTimeout as sleep } from 'node:timers/promises';
import { IdempotentClient } from '../src/client/index.js';
import { AppModule } from '../src/demo/app.module.js';
import { startFakePaymentProvider, type FakePaymentProvider } from '../src/demo/payment-provider/fake-payment-provider.js';
import { ACME, chargesOf, createOrder, setFault } from './support/demo.js';
import { HTTP_ADAPTERS, startApp, type RunningApp } from './support/http-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

describe.each(HTTP_ADAPTERS)('demo payments (phased) (%s)', (adapter) => {
  let db: TestDatabase;
  let provider: FakePaymentProvider;
  let running: RunningApp;
  let keySeq = 0;
  const newKey = () => `pay-${++keySeq}-${Date.now()}`;
  const pay = (orderId: string, key: string, amountCents: number) =>
    Promise.resolve(request(running.url).post(`/orders/${orderId}/payments`).set('Authorization', ACME).set('Idempotency-Key', key).send({ amountCents, currency: 'EUR' }));
  const paymentsOf = (orderId: string) => db.query<{ status: string; provider_charge_id: string }>(`SELECT status, provider_charge_id FROM payments WHERE order_id = $1 ORDER BY created_at`, [orderId]);

  beforeAll(async () => {
    db = await createTestDatabase();
    provider = await startFakePaymentProvider();
    running = await startApp({
      imports: [AppModule.forRoot({ databaseUrl: db.url, paymentProviderUrl: provider.url, paymentTimeoutMs: 400, idempotency: { reaper: false, replayCacheSize: 0 } })],
    }, { adapter });
  });
  afterAll(async () => {
    await running?.close();
    await provider?.close();
    await db?.drop();
  });

  it('charges once, captures with an outbox event, and replays', async () => {
    const orderId = await createOrder(running.url, 'pay-happy');
    const key = newKey();
    const first = await pay(orderId, key, 1100);
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ orderId, status: 'captured', amountCents: 1100, currency: 'EUR' });
    const replay = await pay(orderId, key, 1100);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(first.text);
    const charges = await chargesOf(provider.url, 1100);
    expect(charges).toHaveLength(1);
    expect(first.body.providerChargeId).toBe(charges[0].id);
    expect(await db.query(`SELECT type FROM idempotency_outbox WHERE payload->>'id' = $1`, [first.body.id])).toEqual([{ type: 'payment.captured' }]);
    const listed = await request(running.url).get(`/orders/${orderId}/payments`).set('Authorization', ACME);
    expect(listed.body).toEqual([first.body]);
  });

  it('answers 503 (retry the same key) when the provider fails, and the retry resumes without a second pending payment', async () => {
    const orderId = await createOrder(running.url, 'pay-fail');
    const key = newKey();
    await setFault(provider.url, 1200, 'fail');
    expect((await pay(orderId, key, 1200)).status).toBe(503);
    expect(await paymentsOf(orderId)).toEqual([{ status: 'pending', provider_charge_id: null }]);
    const retry = await pay(orderId, key, 1200);
    expect(retry.status).toBe(201);
    expect(await paymentsOf(orderId)).toEqual([{ status: 'captured', provider_charge_id: retry.body.providerChargeId }]);
    expect(await chargesOf(provider.url, 1200)).toHaveLength(1);
  });

  it('recovers from a provider that charged but never answered: the retry gets the same charge', async () => {
    const orderId = await createOrder(running.url, 'pay-lost-answer');
    const key = newKey();
    await setFault(provider.url, 1300, 'charge-then-hang');
    expect((await pay(orderId, key, 1300)).status).toBe(503);
    const retry = await pay(orderId, key, 1300);
    expect(retry.status).toBe(201);
    const charges = await chargesOf(provider.url, 1300);
    expect(charges).toHaveLength(1);
    expect(retry.body.providerChargeId).toBe(charges[0].id);
  });

  it('runs a key reused after its record expired as a new payment, charged under a new downstream key', async () => {
    const orderId = await createOrder(running.url, 'pay-expired');
    const key = newKey();
    const first = await pay(orderId, key, 1350);
    expect(first.status).toBe(201);
    // No replay cache in this suite: the record ages behind nobody's back.
    await db.query(`UPDATE idempotency_records SET expires_at = now() - interval '1 second' WHERE key = $1`, [key]);
    const again = await pay(orderId, key, 1350);
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    expect(again.body.id).not.toBe(first.body.id);
    const charges = await chargesOf(provider.url, 1350);
    expect(charges).toHaveLength(2);
    expect(charges[0].idempotencyKey).not.toBe(charges[1].idempotencyKey);
    expect(await paymentsOf(orderId)).toEqual([
      { status: 'captured', provider_charge_id: first.body.providerChargeId },
      { status: 'captured', provider_charge_id: again.body.providerChargeId },
    ]);
  });

  it('tells the client to retry the same key while the provider’s outcome is unclear, so a retrying client gets the one charge', async () => {
    const orderId = await createOrder(running.url, 'pay-unclear');
    await setFault(provider.url, 1450, 'charge-then-hang');
    const client = new IdempotentClient({ baseUrls: running.url, headers: { authorization: ACME }, baseDelayMs: 10, sleep: () => sleep(10) });
    const result = await client.send({ path: `/orders/${orderId}/payments`, body: { amountCents: 1450, currency: 'EUR' } });
    expect(result.outcomes[0]).toMatchObject({ status: 503 });
    expect(result).toMatchObject({ stoppedBy: 'answered', response: { status: 201 } });
    const charges = await chargesOf(provider.url, 1450);
    expect(charges).toHaveLength(1);
    expect((result.response!.json as { providerChargeId: string }).providerChargeId).toBe(charges[0].id);
  });

  it('records a decline as a 402 that replays', async () => {
    const orderId = await createOrder(running.url, 'pay-decline');
    const key = newKey();
    await setFault(provider.url, 1400, 'decline');
    const declined = await pay(orderId, key, 1400);
    expect(declined.status).toBe(402);
    expect(declined.body).toMatchObject({ code: 'card_declined', payment: { status: 'declined' } });
    const replay = await pay(orderId, key, 1400);
    expect(replay.status).toBe(402);
    expect(replay.text).toBe(declined.text);
    expect(await paymentsOf(orderId)).toEqual([{ status: 'declined', provider_charge_id: expect.any(String) }]);
  });

  it('records 404 for another tenant’s order', async () => {
    const orderId = await createOrder(running.url, 'pay-foreign');
    const foreign = await request(running.url)
      .post(`/orders/${orderId}/payments`)
      .set('Authorization', 'Bearer demo-key-globex')
      .set('Idempotency-Key', newKey())
      .send({ amountCents: 1500, currency: 'EUR' });
    expect(foreign.status).toBe(404);
    expect(await paymentsOf(orderId)).toEqual([]);
    expect(await chargesOf(provider.url, 1500)).toEqual([]);
  });

  it('records 404 for an unknown order as the problem document the app answers live, and replays the same bytes', async () => {
    const orderId = randomUUID();
    const key = newKey();
    const live = await pay(orderId, key, 1700);
    const replay = await pay(orderId, key, 1700);
    const lookedUp = await request(running.url).get(`/orders/${orderId}`).set('Authorization', ACME);
    expect([live.status, replay.status, lookedUp.status]).toEqual([404, 404, 404]);
    expect(live.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(live.text).toBe(lookedUp.text); // the same error, answered by the app's own problem filter
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.headers['content-type']).toBe(live.headers['content-type']);
    expect(replay.text).toBe(live.text);
  });

  it('frees the key after a validation failure, before anything started', async () => {
    const orderId = await createOrder(running.url, 'pay-invalid');
    const key = newKey();
    expect((await pay(orderId, key, 0)).status).toBe(400);
    expect(await db.query(`SELECT 1 FROM idempotency_records WHERE key = $1`, [key])).toEqual([]);
    expect((await pay(orderId, key, 1600)).status).toBe(201);
  });
});
