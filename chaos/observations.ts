import type { AttemptLog } from './attempt-log.js';
import type { Operation } from './operations.js';

/**
 * Things worth knowing that no invariant forbids. `finalErrorsThatSucceeded`:
 * operations whose only traffic send stopped at a 5xx the client takes as
 * final, and whose re-send after recovery was a replay: the work was done
 * (by a commit whose acknowledgement was lost, or by a reaper) although the
 * client had been told it failed.
 */
export interface Observations {
  finalErrorsThatSucceeded: Record<string, number>;
  examples: string[];
}

/** Finds the operations worth noting in the client's log. */
export function observe(operations: readonly Operation[], log: AttemptLog): Observations {
  const observations: Observations = { finalErrorsThatSucceeded: {}, examples: [] };
  for (const op of operations) {
    const traffic = op.sends.filter((send) => send.phase === 'traffic');
    if (traffic.length !== 1 || traffic[0].stoppedBy !== 'answered' || (traffic[0].status ?? 0) < 500) continue;
    const replayed = log.of(op.id).some((attempt) => attempt.phase === 'verify' && attempt.status === op.expectedStatus && attempt.replayed);
    if (!replayed) continue;
    observations.finalErrorsThatSucceeded[op.kind] = (observations.finalErrorsThatSucceeded[op.kind] ?? 0) + 1;
    if (observations.examples.length < 10) {
      const last = log.of(op.id).filter((attempt) => attempt.phase === 'traffic').at(-1);
      observations.examples.push(`operation ${op.id} (${op.kind}): told ${traffic[0].status} ${last?.body?.slice(0, 160) ?? ''}, later replayed ${op.expectedStatus}`);
    }
  }
  return observations;
}
