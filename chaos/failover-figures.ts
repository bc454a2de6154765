import type { AttemptLog } from './attempt-log.js';
import type { Operation } from './operations.js';
import type { Snapshot } from './snapshot.js';
import { type InvariantResult, parseBody } from './tally.js';

/** What a failover run measured, beside its invariants. */
export interface FailoverFigures {
  operations: number;
  attempts: number;
  /** kill -9 of the primary: one per run. */
  kills: number;
  /** From the kill to the end of the first 2xx, not a replay, of an attempt sent after it: a write on the promoted standby. Undefined when none came. */
  killToFirstSuccessMs?: number;
  /** kill -9, promotion and the endpoint moved, in ms. */
  failoverMs: number;
  /** Attempts sent after the kill that got a 5xx, or no answer, before the first success. */
  failedWhileFailingOver: { status5xx: number; networkErrors: number };
  /** Acknowledgements (2xx answers) whose order or payment is missing, or different, after the failover. */
  lost: number;
  /** Operations with an acknowledged order or payment that no longer exists at all. */
  lostOperations: number;
  /** Payments the fake provider charged more than once, and order operations whose handler ran more often than allowed. */
  runTwice: { providerCharges: number; orderHandlers: number };
}

const violationsOf = (invariants: readonly InvariantResult[], name: string) => invariants.find((invariant) => invariant.name === name)?.violations ?? 0;

/** The figures of a run whose primary was killed at `killAt` and whose endpoint pointed at the promoted standby by `failedOverAt`. */
export function failoverFigures(operations: readonly Operation[], log: AttemptLog, snapshot: Snapshot, invariants: readonly InvariantResult[], killAt: number, failedOverAt: number): FailoverFigures {
  const attempts = operations.flatMap((op) => log.of(op.id));
  // A replay may come from an instance's replay cache, without the database: it proves nothing about the failover.
  const successes = attempts.filter((attempt) => attempt.startedAt >= killAt && attempt.status !== undefined && attempt.status < 300 && !attempt.replayed);
  const firstSuccess = Math.min(...successes.map((attempt) => attempt.endedAt));
  const before = attempts.filter((attempt) => attempt.startedAt >= killAt && attempt.endedAt <= firstSuccess);
  const stored = new Set<unknown>([...snapshot.orders.map((order) => order.id), ...snapshot.payments.map((payment) => payment.id)]);
  const acknowledgedIds = (op: Operation) =>
    log
      .of(op.id)
      .filter((attempt) => attempt.phase === 'traffic' && attempt.status !== undefined && attempt.status < 300)
      .map((attempt) => parseBody(attempt.body)?.id)
      .filter((id) => id !== undefined);
  const chargesPerAmount = new Map<number, number>();
  for (const charge of snapshot.charges) chargesPerAmount.set(charge.amountCents, (chargesPerAmount.get(charge.amountCents) ?? 0) + 1);
  return {
    operations: operations.filter((op) => !op.skipped).length,
    attempts: attempts.length,
    kills: 1,
    killToFirstSuccessMs: Number.isFinite(firstSuccess) ? firstSuccess - killAt : undefined,
    failoverMs: failedOverAt - killAt,
    failedWhileFailingOver: {
      status5xx: before.filter((attempt) => (attempt.status ?? 0) >= 500).length,
      networkErrors: before.filter((attempt) => attempt.error !== undefined).length,
    },
    lost: violationsOf(invariants, 'zero lost acknowledgements'),
    lostOperations: operations.filter((op) => op.effect !== 'none' && acknowledgedIds(op).some((id) => !stored.has(id))).length,
    runTwice: {
      providerCharges: [...chargesPerAmount.values()].filter((count) => count > 1).length,
      orderHandlers: violationsOf(invariants, 'one handler execution per operation'),
    },
  };
}

/** The figures as lines of the printed report. */
export function formatFigures(figures: FailoverFigures): string {
  const first = figures.killToFirstSuccessMs === undefined ? 'none came' : `${figures.killToFirstSuccessMs} ms`;
  return [
    `operations ${figures.operations}, attempts ${figures.attempts}, kills ${figures.kills}`,
    `failover (kill -9, promote, endpoint moved) ${figures.failoverMs} ms; kill to first success ${first}`,
    `before it: ${figures.failedWhileFailingOver.status5xx} attempts answered 5xx, ${figures.failedWhileFailingOver.networkErrors} without an answer`,
    `lost acknowledgements ${figures.lost} (operations whose acknowledged order or payment is gone: ${figures.lostOperations}); run twice: ${figures.runTwice.providerCharges} payments charged twice at the provider, ${figures.runTwice.orderHandlers} order handlers beyond one run`,
  ].join('\n');
}
