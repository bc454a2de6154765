import type { AttemptLog, AttemptRecord } from './attempt-log.js';
import { describeOperation, type Operation } from './operations.js';
import type { ExecutionRow, Snapshot } from './snapshot.js';
import { type InvariantResult, Tally } from './tally.js';

/** The instance a pid of the demo's audit was, when the run started it. */
export type InstanceOfPid = (pid: string) => number | undefined;

/**
 * Whether an attempt may have run the handler in a transaction that rolled
 * back: it met a network error (its instance died, or the client gave up on
 * it) or a 5xx. A refused connection reached no handler.
 */
const mayHaveRolledBack = (attempt: AttemptRecord) => (attempt.error !== undefined && attempt.error !== 'ECONNREFUSED') || (attempt.status ?? 0) >= 500;

const clock = (ms: number) => new Date(ms).toISOString().slice(11, 23);

/**
 * The order handler runs once per operation. A concurrent copy waits for
 * the owner and replays, a retry replays, on any instance: the handler runs
 * again only after a run that rolled back, and such a run leaves a failed
 * attempt behind. So an order operation's runs, counted in the demo's audit
 * (which keeps runs that rolled back), are at most one plus its attempts
 * that may have rolled back, and an operation acknowledged with 201 ran at
 * least once. A reused key's conflicting
 * request (same tenant and sku) must run nothing, so its runs count against
 * the first operation's.
 */
export function checkExecutions(operations: readonly Operation[], log: AttemptLog, snapshot: Snapshot, instanceOf: InstanceOfPid): InvariantResult {
  const tally = new Tally(
    'one handler execution per operation',
    'the order handler runs at most once per operation, plus once per attempt that may have rolled back (network error or 5xx), and at least once when acknowledged',
  );
  const runsByOrder = new Map<string, ExecutionRow[]>();
  for (const run of snapshot.executions) {
    const key = `${run.tenant}|${run.sku}`;
    runsByOrder.set(key, [...(runsByOrder.get(key) ?? []), run]);
  }
  const describeRun = (run: ExecutionRow) => `instance ${instanceOf(run.instance) ?? '?'} (pid ${run.instance}) at ${clock(run.startedAt)}`;
  const describeAttempt = (attempt: AttemptRecord) =>
    `${attempt.phase} copy ${attempt.copy} #${attempt.attempt} on instance ${attempt.instance} ${clock(attempt.startedAt)}-${clock(attempt.endedAt)}: ` +
    `${attempt.status ?? attempt.error}${attempt.replayed ? ' replayed' : ''}`;

  for (const op of operations) {
    if (op.effect !== 'order') continue;
    const runs = runsByOrder.get(`${op.tenant}|${op.sku}`) ?? [];
    const attempts = log.of(op.id);
    const allowed = 1 + attempts.filter(mayHaveRolledBack).length;
    const acknowledged = attempts.some((attempt) => attempt.status === 201);
    if (runs.length <= allowed && (runs.length > 0 || !acknowledged)) continue;
    const problem = runs.length > allowed ? `${runs.length} executions, at most ${allowed} allowed` : 'acknowledged with 201, yet no execution';
    tally.fail(`${describeOperation(op)}: ${problem}; executions: ${runs.map(describeRun).join(', ') || 'none'}; attempts: ${attempts.map(describeAttempt).join('; ')}`);
  }
  return tally.done;
}
