import { Inject, Injectable } from '@nestjs/common';
import { performance } from 'node:perf_hooks';
import type { QueryRunner } from 'typeorm';
import type { ClaimTransaction } from './claim-transaction.js';
import { CurrentOperation } from '../transactions/current-operation.js';
import { IdempotencyDataSource } from '../transactions/idempotency-data-source.js';
import type { ResolvedModuleOptions } from '../options/idempotency.options.js';
import type { PreparedStatement } from '../records/record.statements.js';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../options/idempotency.tokens.js';
import { captureError } from '../outcome/outcome-capture.js';
import type { RecordedOutcome } from '../outcome/recorded-outcome.js';
import { HandlerAbandonedError, HandlerRun, HandlerStillRunningError, lastValueUnlessAbandoned, settlesWithin } from './handler-run.js';
import type { FlowCall } from './one-transaction.terms.js';
import { RequestTransaction } from '../transactions/request-transaction.js';
import { IdempotencyTransactionHost } from '../transactions/transaction-host.js';
import { ownQueryRunner } from '../transactions/transaction-join.js';
import { TransactionLibraries } from '../transactions/libraries/transaction-libraries.js';

/** Taken before the handler runs, where a failure it stores is undone back to (`storesError`). */
export const HANDLER_SAVEPOINT = 'idempotency_claim';

/**
 * The handler of a one-transaction call, run in the claim's transaction:
 * its code joins that transaction (`RequestTransaction`, the app's
 * transaction library), and the transaction stays with it until its own
 * work has settled (`HandlerRun`), not only its Observable.
 */
@Injectable()
export class HandlerInTransaction {
  constructor(
    private readonly transactions: IdempotencyTransactionHost,
    private readonly libraries: TransactionLibraries,
    private readonly served: IdempotencyDataSource,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedModuleOptions,
  ) {}

  /**
   * Runs the handler with the claim's transaction as the current one, and
   * returns once its own work has settled (see `HandlerRun`), bounded by
   * `settleTimeout`; from then on its writes are refused. A failure the
   * terms store undoes the handler's writes only (back to the savepoint) and
   * becomes the recorded outcome. A failure that is not stored returns at
   * once, with the handler still `running`: the key stays claimed, and the
   * caller ends the transaction once the handler settles.
   */
  async run(transaction: ClaimTransaction, call: HandlerCall): Promise<Handled | HandlerFailed> {
    const { runner, id, terms, next, steps, isolation } = call;
    // The caller gave up while the key was claimed: the handler must not start for nobody.
    if (terms.abandonment?.isAbandoned) return { error: new HandlerAbandonedError() };
    const started = performance.now();
    const dataSource = this.served.dataSource;
    const joined = RequestTransaction.install(runner, transaction, {
      isolation,
      deferredConstraints: this.served.deferredConstraints,
      savepoints: this.options.unitSavepoints,
      ownRunner: () => ownQueryRunner(dataSource),
    });
    const { manager } = runner;
    // The module's own writes in the handler's transaction (outbox events) are units like the handler's.
    const send = <Row>(statement: PreparedStatement) => joined.unit(async () => (await transaction.query<Row>(statement)).rows);
    // next.handle() binds the async context, so it is called inside run(), inside the context of the app's transaction library.
    const work = () => this.libraries.around(joined, manager, () => this.transactions.run(manager, () => lastValueUnlessAbandoned(next.handle(), terms.abandonment)));
    const { run, result: ended } = HandlerRun.watch(() => CurrentOperation.run(id, work, { recordAtCommit: true, transaction: { manager, send } }));
    let failure: { error: unknown } | undefined;
    let result: unknown;
    try {
      result = await ended;
    } catch (error) {
      failure = { error };
    } finally {
      steps.handlerMs = performance.now() - started;
      steps.timeline.handler = { start: started, end: performance.now() };
    }
    const running = { run, joined };
    if (failure && run.isRunning && !terms.storesError?.(failure.error)) return { error: failure.error, running };
    if ((await this.settled(running)) === 'still-running') failure ??= { error: new HandlerStillRunningError(this.options.settleTimeout) };
    // Caught or not, a conflict PostgreSQL resolved against this transaction is answered as such, and nothing is recorded.
    if (joined.conflict !== undefined) return { error: joined.conflict };
    // Without unit savepoints, a failure the handler caught left the transaction aborted: nothing of it can commit.
    if (!failure && joined.abortedBy) return { error: joined.abortedBy };
    // A QueryRunner transaction of the handler's rolled back writes that would have committed on their own.
    if (!failure && joined.sharedRollback) return { error: joined.sharedRollback };
    if (!failure) return { outcome: terms.capture(result), result };
    if (!terms.storesError?.(failure.error)) return { error: failure.error };
    await transaction.query(`ROLLBACK TO SAVEPOINT ${HANDLER_SAVEPOINT}`);
    await joined.handlerRolledBack(failure.error);
    return { outcome: captureError(failure.error) };
  }

  /**
   * Waits for the handler to settle, at most `settleTimeout`, then refuses
   * its writes, lets those in flight end (a `transaction()` it did not
   * await), within `settleTimeout` again, and rolls back what transactions
   * of its own it left open.
   */
  private async settled({ run, joined }: RunningHandler): Promise<'settled' | 'still-running'> {
    const settlement = await run.settled(this.options.settleTimeout);
    joined.shut();
    const draining = joined.drain();
    if (draining && !(await settlesWithin(draining, this.options.settleTimeout))) return 'still-running';
    await joined.rollBackLeftOpen();
    return settlement;
  }

  /** Ends a transaction whose answer (`error`) has left once its handler settles: nothing of it is kept. */
  rollBackOnceSettled(running: RunningHandler, transaction: ClaimTransaction, runner: QueryRunner, error: unknown): void {
    void this.settled(running)
      .finally(() => transaction.rollback(error))
      .finally(() => runner.release())
      .catch(() => undefined); // a connection that broke meanwhile is the pool's to discard
  }
}

/** What the handler's run reads of the flow's call. */
export type HandlerCall = Pick<FlowCall, 'id' | 'terms' | 'next' | 'runner' | 'steps' | 'isolation'>;

/** A handler whose Observable ended, and its transaction as it sees it. */
export interface RunningHandler {
  run: HandlerRun;
  joined: RequestTransaction;
}

/** A handler that failed: `running` while its own work has not settled yet. */
export interface HandlerFailed {
  error: unknown;
  running?: RunningHandler;
}

/** What the handler left to record: its outcome, and its own value when it succeeded. */
export interface Handled {
  outcome: RecordedOutcome;
  result?: unknown;
}
