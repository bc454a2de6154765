import type { AdminActionEvent } from '../events/idempotency-event.types.js';

const DONE = { release: 'released', fail: 'marked failed', requeue: 'requeued' } as const;
/** Event ids a line names; the rest are counted. */
const NAMED_IDS = 10;

/**
 * The audit line of an operator's action, shared by the app's log and the
 * CLI's standard error. Every field a request gave (actor, reason,
 * operation, event ids) is quoted, so that nothing an operator typed can
 * end the line or forge one of its own; the key is named by its hash.
 */
export function adminActionLine(event: AdminActionEvent): string {
  const target = event.action === 'requeue' ? deadLetters(event.eventIds ?? []) : `${quote(event.operation ?? '')} key#${event.keyHash}`;
  const done = event.forced ? 'force-released' : DONE[event.action];
  const what = event.result === 'done' ? `${done} ${target}` : `refused to ${event.action} ${target} (${event.refusal})`;
  return `admin: ${quote(event.actor)} ${what}, reason ${quote(event.reason)}`;
}

function deadLetters(ids: readonly string[]): string {
  const more = ids.length > NAMED_IDS ? ` and ${ids.length - NAMED_IDS} more` : '';
  return `${ids.length} dead letter${ids.length === 1 ? '' : 's'} (${ids.slice(0, NAMED_IDS).map(quote).join(', ')}${more})`;
}

/**
 * JSON's quoting, plus the characters JSON leaves raw that a terminal or a
 * log viewer may still act on: DEL, the C1 controls (0x9B starts a terminal
 * escape) and the Unicode line and paragraph separators.
 */
function quote(text: string): string {
  return JSON.stringify(text).replace(/[\u007f-\u009f\u2028\u2029]/g, (character) => `\\u${character.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
