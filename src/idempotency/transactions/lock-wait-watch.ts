import type { QueryRunner } from 'typeorm';
import { LockHeldByRequestError } from '../errors/idempotency.exceptions.js';
import { sqlStateOf } from '../driver/database-errors.js';
import { ContextSlot } from './request-context.js';
import { wrapMethod } from './wrap-method.js';
import { runnerState } from './typeorm-internals.js';

/** What the watch asks of the request a statement escaped from: `RequestTransaction`. */
export interface EscapedRequest {
  readonly isOpen: boolean;
  /** Cancels the statement of backend `pid` if it waits on a lock of the request's; answers whether it did. */
  cancelIfWaitingOnUs(pid: number): Promise<boolean>;
}

/**
 * How long a statement escaped from a request runs before the module asks
 * PostgreSQL what it waits on, and again as long as it runs: PostgreSQL's
 * own `deadlock_timeout` by default.
 */
const CHECK_EVERY_MS = 1000;

const escapes = new ContextSlot<EscapedRequest>('request escaped from');

/** "canceling statement due to user request", as pg_cancel_backend() fails it. */
const QUERY_CANCELED = '57014';

/**
 * A request's handler that awaits work on a connection of its own
 * (`IdempotencyTransactionHost.outside()`) makes the request's connection wait on
 * itself when that work needs a lock the request holds: PostgreSQL sees a
 * transaction waiting for another that is idle, never a deadlock, and
 * both wait for good. So a QueryRunner created in such work is watched:
 * a statement still running after a second is looked at, and one that
 * waits on the request's own backend is cancelled, and fails with
 * `LockHeldByRequestError`, which says what waited on what.
 */
export const LockWaitWatch = {
  /** Runs `work` (which left `request`'s transaction) so that the QueryRunners it creates are watched. */
  escaped<T>(request: EscapedRequest, work: () => T): T {
    return escapes.run(request, work);
  },

  /** Watches `runner`'s statements, where it was created in work escaped from an open request. */
  watch(runner: QueryRunner): QueryRunner {
    const request = escapes.get();
    if (!request?.isOpen) return runner;
    wrapMethod(runner, 'query', (query) =>
      async function (this: QueryRunner, ...args: unknown[]) {
        let cancelled = false;
        let checking: Promise<void> | undefined;
        const timer = setInterval(() => {
          const pid = backendOf(runner);
          if (!request.isOpen || pid === undefined) return;
          checking = request.cancelIfWaitingOnUs(pid).then(
            (done) => void (cancelled ||= done),
            () => undefined,
          );
        }, CHECK_EVERY_MS);
        try {
          return await query.apply(this, args);
        } catch (error) {
          // The cancelled statement's failure may come before the answer of the statement that cancelled it.
          if (sqlStateOf(error) === QUERY_CANCELED) await checking;
          throw cancelled ? new LockHeldByRequestError(String(args[0]), error) : error;
        } finally {
          clearInterval(timer);
        }
      },
    );
    return runner;
  },
};

/** The server process of the runner's pg client, from its BackendKeyData; undefined before it connected. */
export function backendOf(runner: QueryRunner): number | undefined {
  const pid = runnerState(runner).databaseConnection?.processID;
  return typeof pid === 'number' ? pid : undefined;
}
