import type { IdempotencyRecordStatus } from '../records/idempotency-record.entity.js';
import type { ResumeInfo } from '../records/stored-record.js';
import type { RunEffects } from './admin.types.js';

/** The columns a run's effects are read from: the record's, and `phases` and `events` as the admin's `lock` and `detail` add them. */
export interface RunEffectsRow {
  resume: ResumeInfo | null;
  recovery_point: string | null;
  phases: string[];
  events: RunEffects['events'];
}

/** What a record's run did beyond the record, and whether any of it may have reached outside the database. */
export function runEffectsOf(row: RunEffectsRow): RunEffects {
  const { events } = row;
  const external = row.resume !== null || row.recovery_point !== null || row.phases.length > 0 || events.sent + events.pending + events.dead > 0;
  return { operation: row.resume?.operation ?? null, phases: row.phases, recoveryPoint: row.recovery_point, events, external };
}

/**
 * What a release of the record leaves in place, and what the next request
 * with its key does after it, as the operator reads it before releasing: on
 * the page, in the CLI, and in the refusal of a release without `force`.
 */
export function releaseConsequences(status: IdempotencyRecordStatus, effects: RunEffects): string {
  if (!effects.external) {
    if (status === 'in_progress') return 'Its operation never started (no input was stored): nothing can have happened, and the next request with this key runs it.';
    return 'Its writes stay: a release deletes the record only, and the next request with this key runs the operation anew and writes them a second time.';
  }
  return [...whatRan(status, effects), whatARetryDoes(effects)].join(' ');
}

/** Why a release without `force` was refused: what ran, what a retry would do, and the way to finish the operation instead, where there is one. */
export function releaseRefusal(status: IdempotencyRecordStatus, effects: RunEffects): string {
  const instead =
    status === 'in_progress'
      ? 'To finish it instead, let a retry with the same key or the completer resume it: they carry on from the recovery point with the same downstream keys, which the services deduplicate.'
      : status === 'failed'
        ? 'Until it expires, every retry gets its recorded failure.'
        : 'Until it expires, every retry replays its answer.';
  return `${releaseConsequences(status, effects)} ${instead} Release it only if that is what should happen (the first effects were undone, a refund say, or must happen again): with force and a reason (the page's force box, the API's "force": true, the CLI's --force).`;
}

function whatRan(status: IdempotencyRecordStatus, effects: RunEffects): string[] {
  const sentences: string[] = [];
  if (effects.operation !== null || effects.phases.length) {
    const name = effects.operation === null ? 'Its phased operation' : `Its phased operation ${effects.operation}`;
    const finished = effects.phases.length ? `finished phases ${effects.phases.join(', ')} (recovery point ${effects.recoveryPoint ?? 'none'})` : 'no phase finished';
    sentences.push(
      status === 'completed'
        ? `${name} ran to its end: ${finished}.`
        : `${name} started: ${finished}. A phase that was running when it stopped (an external call) may have had its effect without recording it.`,
    );
  }
  const { sent, pending, dead } = effects.events;
  const events = [sent && `${sent} sent`, pending && `${pending} waiting to be sent`, dead && `${dead} dead (a requeue sends ${dead === 1 ? 'it' : 'them'})`].filter(Boolean);
  if (events.length) sentences.push(`Its run added outbox events: ${events.join(', ')}; a release withdraws none of them.`);
  return sentences;
}

function whatARetryDoes(effects: RunEffects): string {
  if (effects.operation !== null || effects.phases.length) {
    return (
      `What its phases did stays, and the next request with this key runs ${effects.operation ?? 'the operation'} anew, as a new run: every phase again, each external call under a new downstream key ` +
      'that its service cannot match to the first one, so that each effect happens a second time.'
    );
  }
  return 'Its writes stay: a release deletes the record only, and the next request with this key runs the operation anew, writes them a second time and adds its events again, each to be delivered a second time.';
}
