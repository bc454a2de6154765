import { Injectable } from '@nestjs/common';
import { IdempotencyDataSource } from '../idempotency-data-source.js';
import { TransactionHost } from '../transaction-host.js';
import { LeaseStore } from './lease.store.js';
import { LeaseLostError, OperationPhases, type Ownership } from './operation-phases.js';
import type { PhasedOperationHandler } from './phased-operation.js';

/**
 * Runs a phased operation for one owner and keeps its lease alive meanwhile:
 * the lease lapses only when the owner dies or hangs, not while it works.
 */
@Injectable()
export class PhasedOperationRunner {
  constructor(
    private readonly leases: LeaseStore,
    private readonly served: IdempotencyDataSource,
    private readonly transactions: TransactionHost,
  ) {}

  async run<I, O>(handler: PhasedOperationHandler<I, O>, input: I, ownership: Omit<Ownership, 'signal'>): Promise<O> {
    const lost = new AbortController();
    const heartbeat = setInterval(() => {
      this.leases.renew(this.leases.pool, ownership.id, ownership.owner, ownership.leaseMs).then(
        (held) => held || lost.abort(new LeaseLostError()),
        () => undefined, // a failed renewal is retried on the next beat; the lease still has time
      );
    }, Math.max(10, Math.floor(ownership.leaseMs / 3)));
    heartbeat.unref();
    try {
      return await handler.run(input, new OperationPhases({ ...ownership, signal: lost.signal }, this.leases, this.served.dataSource, this.transactions));
    } finally {
      clearInterval(heartbeat);
    }
  }
}
