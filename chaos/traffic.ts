import { IdempotentClient, type SendResult } from '../src/client/index.js';
import type { AttemptLog } from './attempt-log.js';
import {
  API_KEYS,
  conflictingOperation,
  type Operation,
  orderOperation,
  paymentOperation,
  SCENARIO_WEIGHTS,
  type ScenarioKind,
  TENANTS,
} from './operations.js';
import type { ProviderControl } from './provider-control.js';
import type { SeededRandom } from './random.js';

/** Long enough for a retry to outlive an instance restart or a PostgreSQL restart. */
const SEND_DEADLINE_MS = 20_000;
const ATTEMPT_TIMEOUT_MS = 8_000;
/** The deadline is the real bound; this only keeps a pathological loop finite. */
const MAX_ATTEMPTS = 200;

/** When the traffic stops: when `running` says so, or after a number of scenarios, whichever comes first. */
export interface TrafficBounds {
  workers: number;
  running: () => boolean;
  maxScenarios: number;
}

/**
 * Drives the cluster with scenarios of logical operations through the
 * retrying client, spread over the instances, and keeps every operation
 * for the invariants.
 */
export class Traffic {
  readonly operations: Operation[] = [];
  private nextScenario = 0;

  constructor(
    private readonly urls: readonly string[],
    private readonly provider: ProviderControl,
    private readonly log: AttemptLog,
    private readonly runTag: string,
  ) {}

  /** Runs `workers` concurrent loops, each one scenario at a time, until the bounds. */
  async run(bounds: TrafficBounds, random: SeededRandom): Promise<void> {
    const worker = async (own: SeededRandom) => {
      while (bounds.running() && this.nextScenario < bounds.maxScenarios) {
        await this.scenario(own.weighted(SCENARIO_WEIGHTS), this.nextScenario++, own);
      }
    };
    await Promise.all(Array.from({ length: bounds.workers }, () => worker(random.fork())));
  }

  /**
   * Removes the transient provider faults no charge consumed, so that
   * recovery meets none. A decline stays: it is the card's answer whenever it
   * is first charged, so the operation still expects its 402.
   */
  async clearProviderFaults(): Promise<void> {
    const transient = ['fail', 'hang', 'charge-then-hang'];
    const faulted = this.operations.filter((op) => transient.includes(op.providerFault) && op.amountCents !== undefined);
    for (const op of faulted) await this.provider.clearFault(op.amountCents!);
  }

  /** Sends every operation once more, after the faults: each must now answer, and answer as before. */
  async verify(concurrency: number, random: SeededRandom): Promise<void> {
    const queue = this.operations.filter((op) => !op.skipped);
    const worker = async () => {
      for (let op = queue.shift(); op; op = queue.shift()) await this.send(op, op.copies, random.int(0, this.urls.length - 1), 'verify', random);
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
  }

  private async scenario(kind: ScenarioKind, n: number, random: SeededRandom): Promise<void> {
    const tenant = random.pick(TENANTS);
    if (kind === 'create') {
      await this.sendCopies(this.add(orderOperation(this.runTag, n, '', 'create', tenant, random)), random);
    } else if (kind === 'burst') {
      const op = this.add(orderOperation(this.runTag, n, '', 'burst', tenant, random));
      op.copies = random.int(3, 5);
      await this.sendCopies(op, random);
    } else if (kind === 'key-reuse') {
      const first = this.add(orderOperation(this.runTag, n, '', 'key-reuse', tenant, random));
      const conflict = this.add(conflictingOperation(first));
      const [result] = await this.sendCopies(first, random);
      if (result.response?.status === first.expectedStatus) await this.sendCopies(conflict, random);
      else conflict.skipped = 'the first request was not acknowledged, so its key holds nothing to conflict with';
    } else if (kind === 'cross-tenant') {
      const acme = this.add(orderOperation(this.runTag, n, '', 'cross-tenant', 'acme', random));
      const globex = this.add({ ...acme, id: `${acme.id}-globex`, tenant: 'globex', sends: [] });
      const start = random.int(0, this.urls.length - 1);
      await Promise.all([this.send(acme, 0, start, 'traffic', random), this.send(globex, 0, start + 1, 'traffic', random)]);
    } else {
      await this.payment(n, tenant, random);
    }
  }

  /** Creates an order, then pays it, with the provider fault the payment drew. */
  private async payment(n: number, tenant: (typeof TENANTS)[number], random: SeededRandom): Promise<void> {
    const order = this.add(orderOperation(this.runTag, n, 'o', 'payment-order', tenant, random));
    const [created] = await this.sendCopies(order, random);
    const orderId = created.response?.status === 201 ? (created.response.json as { id?: string } | undefined)?.id : undefined;
    const payment = this.add(paymentOperation(this.runTag, n, order, orderId ?? '00000000-0000-4000-8000-000000000000', random));
    if (!orderId) {
      payment.skipped = 'its order was not acknowledged';
      return;
    }
    if (payment.providerFault !== 'none') await this.provider.setFault(payment.amountCents!, payment.providerFault);
    await this.sendCopies(payment, random);
  }

  private add(op: Operation): Operation {
    this.operations.push(op);
    return op;
  }

  /** Sends every copy of the operation at once, each to another instance first. */
  private sendCopies(op: Operation, random: SeededRandom): Promise<SendResult[]> {
    const start = random.int(0, this.urls.length - 1);
    return Promise.all(Array.from({ length: op.copies }, (_, copy) => this.send(op, copy, start + copy, 'traffic', random)));
  }

  /** The client retries what it retries by default (409, 503): the run checks those defaults too. */
  private async send(op: Operation, copy: number, firstInstance: number, phase: 'traffic' | 'verify', random: SeededRandom): Promise<SendResult> {
    const count = this.urls.length;
    // A client of its own per send, so that its first attempt goes where this send was aimed.
    const client = new IdempotentClient({
      baseUrls: this.urls.map((_, i) => this.urls[(firstInstance + i) % count]),
      headers: { Authorization: `Bearer ${API_KEYS[op.tenant]}` },
      maxAttempts: MAX_ATTEMPTS,
      baseDelayMs: 50,
      maxDelayMs: 1000,
      deadlineMs: SEND_DEADLINE_MS,
      attemptTimeoutMs: ATTEMPT_TIMEOUT_MS,
      random: () => random.next(),
      fetch: this.log.fetchFor(op, copy, phase),
    });
    const result = await client.send({ method: 'POST', path: op.path, body: op.body, key: op.key });
    op.sends.push({ copy, phase, stoppedBy: result.stoppedBy, attempts: result.attempts, status: result.response?.status, error: result.error });
    return result;
  }
}
