import { Inject, Injectable } from '@nestjs/common';
import type { ResolvedModuleOptions } from './idempotency.options.js';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from './idempotency.tokens.js';
import { IdempotencyDataSource } from './idempotency-data-source.js';
import { IdempotencyStatements, type LiveRecordRow } from './records/record.statements.js';
import { hasOutcome, type RecordId, toStoredRecord } from './records/stored-record.js';
import { OutcomeCodec } from './outcome-codec.js';
import { replayable, type Settled } from './recorded-outcome.js';
import { ReplayLikelihood } from './replay-likelihood.js';
import { type PoolRead, poolReadOf } from './driver/pool-reader.js';
import { TransactionHost } from './transaction-host.js';

/**
 * The fast replay: for an operation whose keys are likely replayed, one read
 * by primary key from the pool, outside any transaction. Otherwise no
 * look-up first: a claim costs the first execution nothing extra, and it
 * finds a held key itself.
 */
@Injectable()
export class FastReplay {
  constructor(
    private readonly replays: ReplayLikelihood,
    private readonly outcomes: OutcomeCodec,
    private readonly transactions: TransactionHost,
    private readonly served: IdempotencyDataSource,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedModuleOptions,
  ) {}

  private read?: PoolRead;

  /** The live record's outcome, if the key is likely replayed and has one. */
  async find(id: RecordId, fingerprint: string): Promise<Settled | undefined> {
    if (!this.options.readFirst || !this.replays.likely(id.operation)) return undefined;
    const read = (this.read ??= poolReadOf(this.served.dataSource, this.options));
    // Outside any transaction: where the read falls back to dataSource.query(), that would join the current one.
    const [row] = await this.transactions.outside(() => read<LiveRecordRow>(IdempotencyStatements.findLive(id)));
    this.replays.observe(id.operation, row !== undefined && hasOutcome(row));
    const record = row && toStoredRecord(row, id, this.outcomes);
    if (!record?.outcome) return undefined;
    return { outcome: replayable(record, fingerprint), replayed: true, expiresAt: record.expiresAt, databaseNow: row.database_now };
  }
}
