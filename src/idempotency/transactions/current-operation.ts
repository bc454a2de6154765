import type { EntityManager } from 'typeorm';
import type { PreparedStatement } from '../records/record.statements.js';
import type { RecordId } from '../records/stored-record.js';
import { ContextSlot } from './request-context.js';

/**
 * The idempotent operation a transaction belongs to: the record's id, the
 * phase of a phased operation, and how many outbox events the transaction
 * has added so far. Outbox events take their ids from it.
 */
interface OperationScope {
  readonly id: RecordId;
  /** Set inside a local phase: each phase is a transaction of its own. */
  readonly phase: string;
  /**
   * Whether the record is inserted only at commit (a one-transaction flow's,
   * claimed by the key's lock): the transaction cannot read it yet, and its
   * claim time will be the transaction's `now()`.
   */
  readonly recordAtCommit: boolean;
  /** Events added so far in this transaction; a new attempt starts at 0 again. */
  events: number;
  /**
   * Where the flow drives the transaction itself: its manager, and how it
   * sends a statement there (named, on the claim's driver), which the
   * outbox uses while that manager is the current one.
   */
  readonly transaction?: OperationTransaction;
}

/** The flow's own transaction, as the outbox writes to it. */
export interface OperationTransaction {
  manager: EntityManager;
  send<Row>(statement: PreparedStatement): Promise<Row[]>;
}

const operations = new ContextSlot<OperationScope>('idempotent operation');

/** Where the flows say which operation their transaction runs, and where the outbox reads it. */
export const CurrentOperation = {
  /** Runs `work` as (a phase of) the operation `id`, with a fresh event count. */
  run<T>(id: RecordId, work: () => T, { phase = '', recordAtCommit = false, transaction }: { phase?: string; recordAtCommit?: boolean; transaction?: OperationTransaction } = {}): T {
    return operations.run({ id, phase, recordAtCommit, events: 0, transaction }, work);
  },

  get(): OperationScope | undefined {
    return operations.get();
  },
};
