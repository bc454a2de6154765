import { type CallHandler, Inject, Injectable } from '@nestjs/common';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { ClaimTransaction } from './claim-transaction.js';
import { isKeyHeldAtCommit, isLockTimeout, isStatementCancelled, transactionConflictOf } from '../driver/database-errors.js';
import { IdleSessionTimeout } from '../driver/idle-session-timeout.js';
import { hashKey, IdempotencyEvents } from '../events/idempotency-events.js';
import { IdempotencyDataSource } from '../transactions/idempotency-data-source.js';
import type { ResolvedModuleOptions } from '../options/idempotency.options.js';
import { type ClaimRow, IdempotencyStatements, type LiveRecordRow, type PreparedStatement, type ReadForClaimRow, type RecordedAtCommitRow } from '../records/record.statements.js';
import type { EncodedOutcome, RecordId } from '../records/stored-record.js';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../options/idempotency.tokens.js';
import { OutcomeCodec } from '../records/outcome-codec.js';
import { ownerPollPause } from '../records/lock-wait.js';
import { IdempotencyTables } from '../records/idempotency-tables.js';
import { type FlowEnding, type FlowSteps, replayable, type Settled } from '../outcome/recorded-outcome.js';
import { ReplayLikelihood } from './fast-replay.js';
import { HandlerAbandonedError } from './handler-run.js';
import type { FlowCall, OneTransactionSettled, OneTransactionTerms } from './one-transaction.terms.js';
import { type Handled, HANDLER_SAVEPOINT, HandlerInTransaction } from './handler-in-transaction.js';
import { RequestTransaction } from '../transactions/request-transaction.js';
import { ownQueryRunner } from '../transactions/transaction-join.js';
import type { RequestFingerprint } from '../fingerprint/request-fingerprints.js';

/** Claims by record that meet a holder committed after their snapshot, before the request answers 503. */
const MAX_CLAIM_ATTEMPTS = 3;
const SAVEPOINT = `SAVEPOINT ${HANDLER_SAVEPOINT}`;

/**
 * The one-transaction flow: the claim of the key, the handler's writes and
 * the outcome commit together, before a byte is sent. It returns what it
 * settled on, or the error to answer, with its steps.
 *
 * The key is claimed before the handler runs. At READ COMMITTED (`claimByLock`),
 * BEGIN goes out with the key's advisory lock and a read of its record; above
 * it (`claimByRecord`), with an insert of its in-progress record. A live
 * record replays (or answers 422) and the handler never runs; a duplicate
 * whose owner is in flight waits for it, then replays what it committed.
 * The completed record goes out with COMMIT, in one statement.
 */
@Injectable()
export class OneTransactionFlow {
  constructor(
    private readonly handler: HandlerInTransaction,
    private readonly served: IdempotencyDataSource,
    private readonly tables: IdempotencyTables,
    private readonly outcomes: OutcomeCodec,
    private readonly events: IdempotencyEvents,
    private readonly replays: ReplayLikelihood,
    private readonly idle: IdleSessionTimeout,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedModuleOptions,
  ) {}

  async execute(id: RecordId, fingerprint: RequestFingerprint, terms: OneTransactionTerms, next: CallHandler): Promise<FlowEnding<OneTransactionSettled>> {
    const runner = ownQueryRunner(this.served.dataSource);
    const call: FlowCall = {
      id,
      fingerprint,
      terms,
      next,
      runner,
      isolation: terms.isolation ?? (await this.served.isolationOn(runner)),
      steps: { collided: false, timeline: {} },
      handedOver: false,
    };
    const { steps } = call;
    let transaction: ClaimTransaction | undefined;
    try {
      // A snapshot that predates the key's lock would miss what its holder committed: above READ COMMITTED, the record is the claim.
      const claimed = call.isolation === 'READ COMMITTED' ? await this.claimByLock(call) : await this.claimByRecord(call);
      if ('settled' in claimed) return { steps, settled: claimed.settled };
      transaction = claimed.transaction;
      const ending = await this.runAndRecord(call, claimed);
      return ending.settled ? ending : { steps, error: this.idle.explained(ending.error, transaction, steps.timeline.handler?.start) };
    } catch (error) {
      await transaction?.rollback(error);
      terms.restoreResponse?.();
      return { steps, error: this.idle.explained(error, transaction, steps.timeline.handler?.start) };
    } finally {
      if (!call.handedOver) await call.runner.release();
    }
  }

  /**
   * Claims the key: BEGIN with its advisory lock, then a read of its
   * record in a statement of its own (a snapshot taken once the lock is
   * held), in one write where the connection is pipelined. The lock held and
   * no live record: the key is this request's, with the transaction open and
   * the expiry its record will get. A live record: its replay, or 422, and
   * nothing runs. The lock held by an owner in flight: wait for it up to
   * `wait` (409 after), then read again: its outcome, or the key, if it
   * rolled back. A record still in progress is a phased operation's claim,
   * which holds no lock while the operation runs: it is polled, as a phased
   * duplicate polls it, until it has an outcome or `wait` runs out.
   */
  private async claimByLock(call: FlowCall): Promise<Claimed | { settled: Settled }> {
    const started = performance.now();
    for (let poll = 0; ; poll++) {
      const claimed = await this.tryClaimByLock(call, started);
      if (claimed !== 'in progress') return claimed;
      const remaining = started + call.terms.wait - performance.now();
      if (remaining <= 0) throw call.terms.inProgress();
      call.steps.collided = true;
      await sleep(ownerPollPause(poll, remaining));
    }
  }

  private async tryClaimByLock(call: FlowCall, started: number): Promise<Claimed | { settled: Settled } | 'in progress'> {
    const { runner, steps, id, terms } = call;
    const lock = this.tables.of(IdempotencyStatements).tryLock(id);
    const read = this.tables.of(IdempotencyStatements).readForClaim(id);
    // The savepoint rides along; it is only ever rolled back to once the key is this request's.
    const begun = await this.timed(steps, started, ClaimTransaction.begin(runner, this.options, 'READ COMMITTED', lock, read, ...this.savepoint(terms)));
    const { transaction } = begun;
    try {
      const [{ locked, database_now }] = begun.results[0].rows as Array<{ locked: boolean; database_now: Date }>;
      let [found] = begun.results[1].rows as ReadForClaimRow[];
      if (!locked) {
        steps.collided = true;
        const waited = await this.timed(steps, started, this.inProgressOnLockTimeout(steps, terms, transaction.queryTogether(this.tables.of(IdempotencyStatements).waitForLock(id, terms.wait), read)));
        [found] = waited[1].rows as ReadForClaimRow[];
      }
      const holder = found?.live ? found : undefined;
      this.replays.observe(id.operation, holder !== undefined);
      if (!holder) return { transaction, expiresAt: new Date(database_now.getTime() + terms.retention), byRecord: false, expired: found !== undefined };
      await transaction.rollback();
      return holder.status === 'in_progress' ? 'in progress' : { settled: this.replayOf(call, holder) };
    } catch (error) {
      await transaction.rollback();
      throw error;
    }
  }

  /**
   * Claims the key at REPEATABLE READ or SERIALIZABLE. There the
   * transaction's snapshot is taken by its first statement, before the
   * key's advisory lock is held, and would not see what a holder committed
   * meanwhile. So the claim inserts the key's in-progress record too, under
   * the same lock: it waits on an owner in flight (claimed either way), and
   * fails with a serialization failure when the key's record was committed
   * after the snapshot; then a fresh transaction claims again and sees it.
   * The record is completed with COMMIT.
   */
  private async claimByRecord(call: FlowCall): Promise<Claimed | { settled: Settled }> {
    const { runner, steps, id, fingerprint, terms, isolation } = call;
    const started = performance.now();
    const claim = this.tables.of(IdempotencyStatements).claim(id, fingerprint.value, terms.retention, terms.wait);
    for (let attempt = 1; ; attempt++) {
      let begun: Awaited<ReturnType<typeof ClaimTransaction.begin>>;
      try {
        begun = await this.timed(steps, started, this.inProgressOnLockTimeout(steps, terms, ClaimTransaction.begin(runner, this.options, isolation, claim, ...this.savepoint(terms))));
      } catch (error) {
        if (transactionConflictOf(error) !== 'serialization' || attempt === MAX_CLAIM_ATTEMPTS) throw error;
        steps.collided = true;
        continue;
      }
      const { transaction } = begun;
      try {
        const row = begun.results[0].rows[0] as ClaimRow;
        const held = await this.replayIfHeld(call, transaction, row);
        if (held) return { settled: held };
        if (row.took_over) steps.tookOver = 'expired';
        return { transaction, expiresAt: row.expires_at!, byRecord: true };
      } catch (error) {
        await transaction.rollback();
        throw error;
      }
    }
  }

  /**
   * Runs the handler on the claim's transaction, then records its outcome
   * with COMMIT. A failure is the handler's own: nobody else ran.
   */
  private async runAndRecord(call: FlowCall, claimed: Claimed): Promise<FlowEnding<OneTransactionSettled>> {
    const { runner, steps, id, fingerprint, terms } = call;
    const { transaction, expiresAt } = claimed;
    const handled = await this.handler.run(transaction, call);
    if ('error' in handled) {
      const { error, running } = handled;
      if (running) {
        // The answer needs nothing from the transaction: it leaves now, and the key stays with the handler until it settles.
        call.handedOver = true;
        this.handler.rollBackOnceSettled(running, transaction, runner, error);
        return { steps, error };
      }
      await transaction.rollback(error);
      return { steps, error };
    }
    if (terms.abandonment?.isAbandoned) {
      const error = new HandlerAbandonedError();
      await transaction.rollback(error);
      return { steps, error };
    }
    // The expiry is bound into a sealed outcome (see OutcomeCodec) where the record stores it exactly.
    const written = { id, fingerprint: fingerprint.value };
    const outcome = this.outcomes.encode(Number.isInteger(terms.retention) ? { ...written, expiresAt } : written, handled.outcome);
    const committed = await this.commitRecord(call, transaction, this.recordOf(call, claimed, outcome));
    if (!committed) {
      terms.restoreResponse?.();
      return { steps, settled: await this.replayCommitted(call) };
    }
    const [row] = committed.rows;
    if (row.took_over) steps.tookOver = 'expired';
    return { steps, settled: executed(handled, row) };
  }

  /**
   * The statement that records the outcome. Claimed by its in-progress
   * record, it completes it. Claimed under the key's lock, with no record
   * found, a plain insert; with an expired one, the insert that takes an
   * expired record over and fails when the key is held.
   */
  private recordOf({ id, fingerprint, terms }: FlowCall, claimed: Claimed, outcome: EncodedOutcome): PreparedStatement {
    const statements = this.tables.of(IdempotencyStatements);
    if (claimed.byRecord) return statements.completeClaim(id, fingerprint.value, terms.retention, outcome);
    if (!claimed.expired) return statements.insertRecord(id, fingerprint.value, terms.retention, outcome);
    return statements.recordAtCommit(id, fingerprint.value, terms.retention, terms.wait, outcome);
  }

  /**
   * Sends the record with COMMIT, in one write where the connection is
   * pipelined. Undefined when the key was held, and so nothing committed: a
   * claim that took no lock reached it first (an instance of an earlier
   * version, during an upgrade); 409 when its owner outlasted `wait`.
   */
  private async commitRecord({ id, terms, steps }: FlowCall, transaction: ClaimTransaction, record: PreparedStatement): Promise<{ rows: RecordedAtCommitRow[] } | undefined> {
    const started = performance.now();
    try {
      const committed = await transaction.commitWith<RecordedAtCommitRow>(record);
      this.replays.observe(id.operation, false);
      return committed;
    } catch (error) {
      if (isKeyHeldAtCommit(error)) {
        this.replays.observe(id.operation, true);
        return undefined;
      }
      if (isLockTimeout(error)) {
        steps.collided = true;
        throw terms.inProgress();
      }
      this.commitFailed(id, error);
      throw error;
    } finally {
      steps.timeline.commit = { start: started, end: performance.now() };
    }
  }

  /** The record that held the key at commit, read after the rollback: committed by now, since the insert waited for its owner. */
  private async replayCommitted(call: FlowCall): Promise<Settled> {
    const { runner } = call;
    const { text, values } = this.tables.of(IdempotencyStatements).readRecord(call.id);
    const [holder]: LiveRecordRow[] = await RequestTransaction.ownStatements(runner, () => runner.query(text, values));
    return this.replayOf(call, holder);
  }

  /** What a key-taking statement found: undefined when it took the key (the caller's to use or give up), else the holder's outcome to replay. */
  private async replayIfHeld(call: FlowCall, transaction: ClaimTransaction, row: ClaimRow): Promise<Settled | undefined> {
    this.replays.observe(call.id.operation, !row.claimed);
    if (row.claimed) return undefined;
    if (row.fingerprint == null) call.steps.collided = true;
    return this.replayHolder(call, transaction, row.fingerprint == null ? undefined : row);
  }

  /**
   * A lock wait on the key that outlasted `wait` means an owner is still in
   * flight. The statement bounds its wait by the session's
   * `statement_timeout` too (see records/lock-wait.ts); one that timeout
   * cancelled all the same (a busy server spent the margin, or a claim
   * waited on the row twice) waited on the owner as well: these statements
   * carry no outcome, and nothing else in them takes time. Not so the
   * record sent with COMMIT, whose cancellation stays an error.
   */
  private inProgressOnLockTimeout<T>(steps: FlowSteps, terms: OneTransactionTerms, statement: Promise<T>): Promise<T> {
    return statement.catch((error: unknown) => {
      if (!isLockTimeout(error) && !isStatementCancelled(error)) throw error;
      steps.collided = true;
      throw terms.inProgress();
    });
  }

  private timed<T>(steps: FlowSteps, started: number, statement: Promise<T>): Promise<T> {
    return statement.finally(() => {
      const ended = performance.now();
      steps.claimMs = ended - started;
      steps.timeline.claim = { start: started, end: ended };
    });
  }

  private commitFailed(id: RecordId, error: unknown): void {
    this.events.emit({ kind: 'commit_failed', operation: id.operation, keyHash: hashKey(id), error: (error as Error).message });
  }

  /** The savepoint a stored failure rolls back to, sent with the claim. */
  private savepoint(terms: OneTransactionTerms): string[] {
    return terms.storesError ? [SAVEPOINT] : [];
  }

  /**
   * The key is held. A live record the claim's snapshot could see was
   * committed before it; none means an owner committed while the claim
   * waited on its row (a first execution, or a takeover of an expired
   * record), and a fresh read finds what it recorded. Neither read returns an
   * expired record: nothing replays, nor answers 422, from one.
   */
  private async replayHolder(call: FlowCall, transaction: ClaimTransaction, row: ClaimRow | undefined): Promise<Settled> {
    const holder = row ?? (await transaction.query<LiveRecordRow>(this.tables.of(IdempotencyStatements).readRecord(call.id))).rows[0];
    await transaction.rollback();
    return this.replayOf(call, holder as LiveRecordRow | undefined);
  }

  /** The holder's outcome as the answer: 422 for another request's, 409 while it has none. */
  private replayOf({ id, fingerprint, terms }: FlowCall, holder: LiveRecordRow | undefined): Settled {
    // An outcome that does not decrypt, or a fingerprint that cannot be checked, throws here: nothing is replayed, and the claim took nothing over.
    const record = holder && this.outcomes.storedRecord(holder, id);
    if (!holder || !record?.outcome) throw terms.inProgress();
    return { outcome: replayable(record, fingerprint, terms.reused), replayed: true, expiresAt: record.expiresAt, databaseNow: holder.database_now };
  }
}

/** The key, claimed before the handler runs: by its lock (a record found expired, or none), or by an in-progress record. */
type Claimed = { transaction: ClaimTransaction; expiresAt: Date } & ({ byRecord: false; expired: boolean } | { byRecord: true });

/** Settled on the handler's own outcome, as the key-taking statement's row dates it. */
function executed({ outcome, result }: Handled, row: RecordedAtCommitRow): OneTransactionSettled {
  return { outcome, result, replayed: false, expiresAt: row.expires_at, databaseNow: row.database_now };
}
