import { Inject, Injectable } from '@nestjs/common';
import DataLoader from 'dataloader';
import type { ResolvedModuleOptions } from '../options/idempotency.options.js';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../options/idempotency.tokens.js';
import { IdempotencyDataSource } from '../transactions/idempotency-data-source.js';
import { type FoundLiveRow, IdempotencyStatements, type LiveRecordRow } from '../records/record.statements.js';
import type { RecordId } from '../records/stored-record.js';
import { hasOutcome, OutcomeCodec } from '../records/outcome-codec.js';
import { IdempotencyTables } from '../records/idempotency-tables.js';
import { replayable, type Settled } from '../outcome/recorded-outcome.js';
import type { RequestFingerprint } from '../fingerprint/request-fingerprints.js';
import { poolReadOf } from '../driver/pool-reader.js';
import { IdempotencyTransactionHost } from '../transactions/transaction-host.js';

/** The most keys one look-up statement asks for. */
const MAX_KEYS_PER_LOOK_UP = 100;

/**
 * Per operation, how often a claim has lately found its key already held: an
 * exponentially weighted average over roughly the last twenty claims. While
 * replays are that common (clients retrying through other instances, whose
 * caches are cold), a plain read first replays them without a transaction;
 * otherwise the claim goes first, and a first execution pays nothing for a
 * look-up.
 */
export class ReplayLikelihood {
  private readonly rates = new Map<string, number>();

  constructor(
    private readonly threshold = 0.1,
    private readonly weight = 0.05,
  ) {}

  likely(operation: string): boolean {
    return (this.rates.get(operation) ?? 0) > this.threshold;
  }

  /** Records whether a claim, or a look-up, found the key held. */
  observe(operation: string, held: boolean): void {
    const rate = this.rates.get(operation) ?? 0;
    this.rates.set(operation, rate + this.weight * ((held ? 1 : 0) - rate));
  }
}

/**
 * The fast replay: for an operation whose keys are likely replayed, one read
 * by primary key from the pool, outside any transaction. Otherwise no
 * look-up first: a claim costs the first execution nothing extra, and it
 * finds a held key itself.
 *
 * The reads of requests that arrive together go as one statement: each
 * waits for the end of the event loop's current turn (`setImmediate`), by
 * which time every request that turn delivered has asked. Under load, one
 * statement and one round trip then serve many replays; alone, a read waits
 * for nothing but the rest of its own turn.
 */
@Injectable()
export class FastReplay {
  constructor(
    private readonly replays: ReplayLikelihood,
    private readonly outcomes: OutcomeCodec,
    private readonly transactions: IdempotencyTransactionHost,
    private readonly served: IdempotencyDataSource,
    private readonly tables: IdempotencyTables,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedModuleOptions,
  ) {}

  private lookUps?: DataLoader<RecordId, LiveRecordRow | undefined>;

  /** The live record's outcome, if the key is likely replayed and has one. */
  async find(id: RecordId, fingerprint: RequestFingerprint): Promise<Settled | undefined> {
    if (!this.options.readFirst || !this.replays.likely(id.operation)) return undefined;
    const row = await (this.lookUps ??= this.batchedLookUps()).load(id);
    this.replays.observe(id.operation, row !== undefined && hasOutcome(row));
    if (!row) return undefined;
    const record = this.outcomes.storedRecord(row, id);
    if (!record.outcome) return undefined;
    return { outcome: replayable(record, fingerprint), replayed: true, expiresAt: record.expiresAt, databaseNow: row.database_now };
  }

  /** Built on first use: the DataSource is initialised by then. */
  private batchedLookUps(): DataLoader<RecordId, LiveRecordRow | undefined> {
    const read = poolReadOf(this.served.dataSource, this.options);
    const lookUp = async (ids: readonly RecordId[]): Promise<Array<LiveRecordRow | undefined>> => {
      // Outside any transaction: where the read falls back to dataSource.query(), that would join the current one.
      const rows = await this.transactions.outside(() => read<FoundLiveRow>(this.tables.of(IdempotencyStatements).findLive(ids)));
      const found = ids.map((): LiveRecordRow | undefined => undefined);
      for (const row of rows) found[row.i - 1] = row;
      return found;
    };
    // No memo: a record must be read after it was asked for, never served from an earlier read.
    return new DataLoader(lookUp, { cache: false, maxBatchSize: MAX_KEYS_PER_LOOK_UP, batchScheduleFn: (send) => setImmediate(send) });
  }
}
