import type { AttemptLog } from './attempt-log.js';
import type { UnexpectedExit } from './cluster.js';
import { checkEffects } from './effect-invariants.js';
import { checkExecutions, type InstanceOfPid } from './execution-invariants.js';
import { checkFinalAnswers } from './final-answer-invariants.js';
import { describeOperation, type Operation } from './operations.js';
import { checkResponses, type FaultTimeline } from './response-invariants.js';
import type { InProgressClaim, Snapshot } from './snapshot.js';
import { type InvariantResult, Tally } from './tally.js';

/** Everything the invariants are checked against, gathered after the run. */
export interface RunEvidence {
  operations: readonly Operation[];
  log: AttemptLog;
  snapshot: Snapshot;
  /** Read after the lease and a reaper interval had passed, before the verification re-sends. */
  inProgress: readonly InProgressClaim[];
  unexpectedExits: readonly UnexpectedExit[];
  inFault: FaultTimeline;
  instanceOf: InstanceOfPid;
}

/** Every invariant of the run, in report order. */
export function checkInvariants(evidence: RunEvidence): InvariantResult[] {
  const claims = new Tally('zero claims in progress', 'no idempotency record still in_progress once the lease and one reaper interval have passed');
  for (const claim of evidence.inProgress) {
    const op = evidence.operations.find((candidate) => candidate.key === claim.key && claim.scope === `tenant:${candidate.tenant}`);
    claims.fail(`${op ? describeOperation(op) : 'no known operation'}, key ${claim.key}: recovery point ${claim.recovery_point ?? '(none)'}, ${claim.attempts} attempts, lease until ${claim.lease_expires_at}`);
  }
  const crashes = new Tally('no instance exits on its own', 'an app instance ends only when the harness kills it');
  for (const exit of evidence.unexpectedExits) {
    crashes.fail(`instance ${exit.instance} exited (code ${exit.code}, signal ${exit.signal}) at ${new Date(exit.at).toISOString()}: ${exit.tail.slice(-5).join(' | ')}`);
  }
  return [
    ...checkEffects(evidence.operations, evidence.log, evidence.snapshot),
    checkExecutions(evidence.operations, evidence.log, evidence.snapshot, evidence.instanceOf),
    ...checkResponses(evidence.operations, evidence.log, evidence.inFault),
    checkFinalAnswers(evidence.operations, evidence.log, evidence.snapshot),
    claims.done,
    crashes.done,
  ];
}
