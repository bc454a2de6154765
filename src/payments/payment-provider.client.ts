import { BadGatewayException, Inject, Injectable } from '@nestjs/common';

export const PAYMENT_PROVIDER = Symbol('PAYMENT_PROVIDER');

/** Where the provider is, and how long to wait for it before calling the outcome unclear. */
export interface PaymentProviderOptions {
  url: string;
  timeoutMs?: number;
}

export interface ChargeRequest {
  amountCents: number;
  currency: string;
  /** Our payment id, for the provider's records. */
  reference: string;
}

export interface ChargeResult {
  id: string;
  status: 'succeeded' | 'declined';
}

/** Charges through the payment provider's HTTP API. A decline is a result; anything unclear is a 502. */
@Injectable()
export class PaymentProviderClient {
  constructor(@Inject(PAYMENT_PROVIDER) private readonly options: PaymentProviderOptions) {}

  async charge(request: ChargeRequest, idempotencyKey: string, signal: AbortSignal): Promise<ChargeResult> {
    const response = await fetch(`${this.options.url}/charges`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
      body: JSON.stringify(request),
      signal: AbortSignal.any([signal, AbortSignal.timeout(this.options.timeoutMs ?? 5000)]),
    }).catch((error: Error) => {
      throw new BadGatewayException(`payment provider unreachable: ${error.message}`);
    });
    if (response.status !== 200 && response.status !== 201 && response.status !== 402) {
      throw new BadGatewayException(`payment provider answered ${response.status}`);
    }
    const { id, status } = (await response.json()) as ChargeResult;
    return { id, status };
  }
}
