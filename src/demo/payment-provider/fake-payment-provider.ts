import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';

/** A charge in the provider's own ledger. */
export interface Charge {
  id: string;
  idempotencyKey: string;
  amountCents: number;
  currency: string;
  reference: string;
  status: 'succeeded' | 'declined';
  createdAt: string;
}

/**
 * What the provider does with the next charges for a reference or amount:
 * `fail` answers 500 without charging, `hang` never answers and charges
 * nothing, `charge-then-hang` charges and then never answers (a crash of the
 * caller after the charge looks the same), `decline` records a declined charge.
 */
export type FaultMode = 'fail' | 'hang' | 'charge-then-hang' | 'decline';

export interface FakePaymentProvider {
  url: string;
  close(): Promise<void>;
}

/**
 * A small payment provider on loopback, the kind of peer the demo charges
 * through. It honours its own `Idempotency-Key` (a repeated key returns the
 * first charge), keeps a ledger (`GET /charges`), and takes faults per
 * reference or amount (`PUT /faults/:reference` or `PUT /faults/amount:<cents>` with `{ "mode": ..., "times"?: n }`,
 * `DELETE /faults/:reference`).
 */
export async function startFakePaymentProvider(options: { port?: number; host?: string } = {}): Promise<FakePaymentProvider> {
  const charges = new Map<string, Charge>();
  const faults = new Map<string, { mode: FaultMode; times: number }>();

  /** A fault set for the charge's reference, or for its amount (`amount:<cents>`), which callers know up front. */
  const takeFault = (reference: string, amountCents: number): FaultMode | undefined => {
    const match = faults.has(reference) ? reference : `amount:${amountCents}`;
    const fault = faults.get(match);
    if (!fault) return undefined;
    if (--fault.times <= 0) faults.delete(match);
    return fault.mode;
  };

  const charge = (key: string, body: Partial<Charge>, response: ServerResponse) => {
    const known = charges.get(key);
    if (known) {
      const same = known.amountCents === body.amountCents && known.currency === body.currency && known.reference === body.reference;
      return same ? send(response, known.status === 'declined' ? 402 : 200, known) : send(response, 422, { error: 'idempotency key reused with other parameters' });
    }
    if (!Number.isInteger(body.amountCents) || typeof body.currency !== 'string' || typeof body.reference !== 'string') {
      return send(response, 400, { error: 'amountCents, currency and reference are required' });
    }
    const fault = takeFault(body.reference, body.amountCents!);
    if (fault === 'fail') return send(response, 500, { error: 'provider failure' });
    if (fault === 'hang') return;
    const recorded: Charge = {
      id: `ch_${randomUUID().replaceAll('-', '')}`,
      idempotencyKey: key,
      amountCents: body.amountCents!,
      currency: body.currency,
      reference: body.reference,
      status: fault === 'decline' ? 'declined' : 'succeeded',
      createdAt: new Date().toISOString(),
    };
    charges.set(key, recorded);
    if (fault === 'charge-then-hang') return;
    send(response, recorded.status === 'declined' ? 402 : 201, recorded);
  };

  const server = createServer(async (request, response) => {
    const url = new URL(request.url ?? '/', 'http://provider');
    const body = request.method === 'GET' || request.method === 'DELETE' ? {} : await readJson(request).catch(() => undefined);
    if (body === undefined) return send(response, 400, { error: 'body is not JSON' });
    const faultPath = /^\/faults\/([^/]+)$/.exec(url.pathname);
    if (request.method === 'POST' && url.pathname === '/charges') {
      const key = request.headers['idempotency-key'];
      if (typeof key !== 'string' || !key) return send(response, 400, { error: 'Idempotency-Key required' });
      return charge(key, body as Partial<Charge>, response);
    }
    if (request.method === 'GET' && url.pathname === '/charges') {
      const reference = url.searchParams.get('reference');
      return send(response, 200, [...charges.values()].filter((c) => reference === null || c.reference === reference));
    }
    if (request.method === 'PUT' && faultPath) {
      const { mode, times } = body as { mode: FaultMode; times?: number };
      faults.set(decodeURIComponent(faultPath[1]), { mode, times: times ?? 1 });
      return send(response, 204);
    }
    if (request.method === 'DELETE' && faultPath) {
      faults.delete(decodeURIComponent(faultPath[1]));
      return send(response, 204);
    }
    send(response, 404, { error: 'not found' });
  });

  await new Promise<void>((resolve) => server.listen(options.port ?? 0, options.host ?? '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://${options.host ?? '127.0.0.1'}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections(); // hung requests would keep it open for good
        server.close(() => resolve());
      }),
  };
}

function send(response: ServerResponse, status: number, body?: unknown): void {
  response.writeHead(status, body === undefined ? {} : { 'content-type': 'application/json' });
  response.end(body === undefined ? undefined : JSON.stringify(body));
}

async function readJson(request: IncomingMessage): Promise<unknown> {
  let text = '';
  for await (const chunk of request) text += chunk;
  return text ? JSON.parse(text) : {};
}
