import type { AttemptLog } from './attempt-log.js';
import { describeOperation, type Operation } from './operations.js';
import { type InvariantResult, parseBody, Tally } from './tally.js';

/** Whether an attempt ran into a fault window or the grace after it. */
export type FaultTimeline = (from: number, to: number) => boolean;

/** A charge the provider failed or left hanging leaves its payment unfinished: 503, retry the same key. */
const PROVIDER_FAULTS_ANSWERED_503 = new Set(['fail', 'hang', 'charge-then-hang']);
const OPERATION_UNFINISHED = 'urn:nest-idempotency:problem:operation-unfinished';

/**
 * What the clients were told, held against the contract: every replay the
 * same bytes as the first final answer, no 5xx outside fault windows, 4xx
 * only where the scenario asks for one, and every operation answered once
 * the faults are over.
 */
export function checkResponses(operations: readonly Operation[], log: AttemptLog, inFault: FaultTimeline): InvariantResult[] {
  const replays = new Tally('replays byte-identical', 'every final answer of an operation (replays, burst copies, re-sends) has the status, body and Location of its first');
  const serverErrors = new Tally('no 5xx outside fault windows', 'a 5xx only while a database fault (or its grace period) lasts, or a 503 operation-unfinished for a charge the provider was told to fail or hang');
  const statuses = new Tally('4xx and 2xx only where expected', '422 only for a reused key, 402 only for a declined charge, 409 anywhere; never 400, 401, 404 or an unexpected success');
  const unresolved = new Tally('every operation answered after recovery', "the verification re-send of each operation gets the operation's expected final status");

  for (const op of operations) {
    if (op.skipped) continue;
    const attempts = [...log.of(op.id)].sort((a, b) => a.endedAt - b.endedAt);
    const finals = attempts.filter((attempt) => attempt.status === op.expectedStatus);
    const first = finals[0];
    for (const later of finals.slice(1)) {
      const what = later.body !== first.body ? 'body' : later.location !== first.location ? 'Location' : undefined;
      if (what) {
        replays.fail(`${describeOperation(op)}: ${later.phase} copy ${later.copy} attempt ${later.attempt}${later.replayed ? ' (replayed)' : ''} differs in its ${what}: ${clip(later.body)} vs first ${clip(first.body)}`);
      }
    }
    for (const attempt of attempts) {
      const status = attempt.status;
      if (status === undefined || status === op.expectedStatus || status === 409) continue;
      const where = `${describeOperation(op)}, ${attempt.phase} copy ${attempt.copy} attempt ${attempt.attempt} on instance ${attempt.instance} at ${new Date(attempt.startedAt).toISOString()}`;
      if (status >= 500) {
        const expectedFromProvider = status === 503 && PROVIDER_FAULTS_ANSWERED_503.has(op.providerFault) && parseBody(attempt.body)?.type === OPERATION_UNFINISHED;
        if (!expectedFromProvider && !inFault(attempt.startedAt, attempt.endedAt)) serverErrors.fail(`${where}: ${status} ${clip(attempt.body)}`);
      } else {
        statuses.fail(`${where}: ${status}, expected ${op.expectedStatus}: ${clip(attempt.body)}`);
      }
    }
    const verification = op.sends.find((send) => send.phase === 'verify');
    if (verification?.status !== op.expectedStatus) {
      unresolved.fail(`${describeOperation(op)}: re-send after recovery got ${verification?.status ?? verification?.error ?? 'nothing'} (${verification?.stoppedBy ?? 'not sent'})`);
    }
  }
  return [replays.done, serverErrors.done, statuses.done, unresolved.done];
}

function clip(text: string | undefined): string {
  if (text === undefined) return '(no body)';
  return text.length > 240 ? `${text.slice(0, 240)}...` : text;
}
