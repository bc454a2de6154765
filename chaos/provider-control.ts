import type { Charge, FaultMode } from '../src/demo/payment-provider/fake-payment-provider.js';

/** A charge as the fake provider's ledger (`GET /charges`) lists it. */
export type LedgerCharge = Charge;

/** Steers the fake payment provider over its HTTP API, and reads its ledger. */
export class ProviderControl {
  constructor(readonly url: string) {}

  /** Applies `mode` to the next charge of this amount (amounts are unique per operation). */
  async setFault(amountCents: number, mode: FaultMode): Promise<void> {
    const response = await fetch(`${this.url}/faults/amount:${amountCents}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ mode, times: 1 }),
    });
    if (response.status !== 204) throw new Error(`provider refused a fault for ${amountCents}: ${response.status}`);
  }

  /** Removes a fault that no charge consumed, so that recovery after the traffic meets none. */
  async clearFault(amountCents: number): Promise<void> {
    await (await fetch(`${this.url}/faults/amount:${amountCents}`, { method: 'DELETE' })).arrayBuffer();
  }

  async ledger(): Promise<LedgerCharge[]> {
    const response = await fetch(`${this.url}/charges`);
    if (!response.ok) throw new Error(`provider ledger: ${response.status}`);
    return (await response.json()) as LedgerCharge[];
  }
}
