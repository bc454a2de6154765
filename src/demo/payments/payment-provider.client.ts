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

/** Charges through the payment provider's HTTP API. A decline is a result; anything unclear is a 502 (which a phased route answers as 503: retry the same key). */
@Injectable()
export class PaymentProviderClient {
  constructor(@Inject(PAYMENT_PROVIDER) private readonly options: PaymentProviderOptions) {}

  async charge(request: ChargeRequest, idempotencyKey: string, signal: AbortSignal): Promise<ChargeResult> {
    const deadline = abortOnTimeoutOr(signal, this.options.timeoutMs ?? 5000);
    try {
      const response = await fetch(`${this.options.url}/charges`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
        body: JSON.stringify(request),
        signal: deadline.signal,
      });
      if (response.status !== 200 && response.status !== 201 && response.status !== 402) {
        throw new BadGatewayException(`payment provider answered ${response.status}`);
      }
      const { id, status } = (await response.json()) as ChargeResult;
      return { id, status };
    } catch (error) {
      throw error instanceof BadGatewayException ? error : new BadGatewayException(`payment provider unreachable: ${(error as Error).message}`);
    } finally {
      deadline.clear();
    }
  }
}

/**
 * A signal aborted by `signal` or after `timeoutMs`. Built by hand: on Node 20,
 * `AbortSignal.any([signal, AbortSignal.timeout(ms)])` handed to fetch can
 * fail to fire once garbage collected, and a charge would then hang for good.
 */
function abortOnTimeoutOr(signal: AbortSignal, timeoutMs: number): { signal: AbortSignal; clear(): void } {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
  const forward = () => controller.abort(signal.reason);
  if (signal.aborted) forward();
  signal.addEventListener('abort', forward, { once: true });
  return {
    signal: controller.signal,
    clear: () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', forward);
    },
  };
}
