import request from 'supertest';
import type { Charge } from '../../src/demo/payment-provider/fake-payment-provider.js';

export const ACME = 'Bearer demo-key-acme';

/** Creates an order through the demo's API and returns its id. */
export async function createOrder(url: string, sku: string): Promise<string> {
  const response = await request(url)
    .post('/orders')
    .set('Authorization', ACME)
    .set('Idempotency-Key', `order-for-${sku}-${Date.now()}`)
    .send({ sku, quantity: 1 });
  if (response.status !== 201) throw new Error(`order not created: ${response.status} ${response.text}`);
  return response.body.id;
}

/** The fake provider's ledger for one amount. */
export async function chargesOf(providerUrl: string, amountCents: number): Promise<Charge[]> {
  const charges = (await (await fetch(`${providerUrl}/charges`)).json()) as Charge[];
  return charges.filter((charge) => charge.amountCents === amountCents);
}

export async function setFault(providerUrl: string, amountCents: number, mode: string, times = 1): Promise<void> {
  await fetch(`${providerUrl}/faults/amount:${amountCents}`, { method: 'PUT', body: JSON.stringify({ mode, times }) });
}
