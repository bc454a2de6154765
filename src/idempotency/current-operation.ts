import { AsyncLocalStorage } from 'node:async_hooks';
import type { RecordId } from './records/stored-record.js';

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
   * Whether the record is inserted only at commit (`claim: 'at-commit'`): the
   * transaction cannot read it yet, and its claim time will be the
   * transaction's `now()`.
   */
  readonly recordAtCommit: boolean;
  /** Events added so far in this transaction; a new attempt starts at 0 again. */
  events: number;
}

const storage = new AsyncLocalStorage<OperationScope>();

/** Where the flows say which operation their transaction runs, and where the outbox reads it. */
export const CurrentOperation = {
  /** Runs `work` as (a phase of) the operation `id`, with a fresh event count. */
  run<T>(id: RecordId, work: () => T, { phase = '', recordAtCommit = false }: { phase?: string; recordAtCommit?: boolean } = {}): T {
    return storage.run({ id, phase, recordAtCommit, events: 0 }, work);
  },

  get(): OperationScope | undefined {
    return storage.getStore();
  },
};
