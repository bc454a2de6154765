import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { TransactionHost } from '../transaction-host.js';
import { LeaseStore } from './lease.store.js';
import type { PhasedOperation } from './phased-operation.js';
import { LeaseLostError, type Ownership, Phases } from './phases.js';

/**
 * Runs a phased operation for one owner and keeps its lease alive meanwhile:
 * the lease lapses only when the owner dies or hangs, not while it works.
 */
@Injectable()
export class OperationRunner {
  constructor(
    private readonly leases: LeaseStore,
    private readonly dataSource: DataSource,
    private readonly transactions: TransactionHost,
  ) {}

  async run<I, O>(operation: PhasedOperation<I, O>, input: I, ownership: Omit<Ownership, 'signal'>): Promise<O> {
    const lost = new AbortController();
    const heartbeat = setInterval(() => {
      this.leases.renew(this.dataSource, ownership.id, ownership.owner, ownership.leaseMs).then(
        (held) => held || lost.abort(new LeaseLostError()),
        () => undefined, // a failed renewal is retried on the next beat; the lease still has time
      );
    }, Math.max(10, Math.floor(ownership.leaseMs / 3)));
    heartbeat.unref();
    try {
      return await operation.run(input, new Phases({ ...ownership, signal: lost.signal }, this.leases, this.dataSource, this.transactions));
    } finally {
      clearInterval(heartbeat);
    }
  }
}
