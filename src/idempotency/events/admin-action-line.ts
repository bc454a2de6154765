import type { AdminActionEvent } from './idempotency-event.types.js';

const DONE = { release: 'released', fail: 'marked failed', requeue: 'requeued' } as const;
/** Event ids a line names; the rest are counted. */
const NAMED_IDS = 10;

/**
 * The audit line of an operator's action, shared by the app's log and the
 * CLI's standard error. The reason is quoted as JSON, so that what an
 * operator typed can never forge a line of its own.
 */
export function adminActionLine(event: AdminActionEvent): string {
  const target = event.action === 'requeue' ? deadLetters(event.eventIds ?? []) : `${event.operation} key#${event.keyHash}`;
  const done = event.forced ? 'force-released' : DONE[event.action];
  const what = event.result === 'done' ? `${done} ${target}` : `refused to ${event.action} ${target} (${event.refusal})`;
  return `admin: ${JSON.stringify(event.actor)} ${what}, reason ${JSON.stringify(event.reason)}`;
}

function deadLetters(ids: readonly string[]): string {
  const more = ids.length > NAMED_IDS ? ` and ${ids.length - NAMED_IDS} more` : '';
  return `${ids.length} dead letter${ids.length === 1 ? '' : 's'} (${ids.slice(0, NAMED_IDS).join(', ')}${more})`;
}
