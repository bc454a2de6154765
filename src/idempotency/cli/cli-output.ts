import type { AdminActionResult, AdminPage, OutboxEventView, RecordDetail, RecordSummary, UnfinishedOperation } from '../admin/admin.types.js';
import { jsonText, terminalText } from './terminal-text.js';
import { releaseConsequences } from '../admin/run-effects.js';

/**
 * Where the CLI writes: its answer to standard output, its audit lines and
 * errors to standard error. Each call is one line, or one JSON document:
 * the only line breaks a terminal gets are the CLI's own.
 */
export interface CliStreams {
  out(text: string): void;
  err(text: string): void;
}

type Column<Item> = [header: string, value: (item: Item) => unknown];

const time = (date: Date | null | undefined) => (date ? date.toISOString() : '');

/** The columns of a records list. */
export const RECORD_COLUMNS: Column<RecordSummary>[] = [
  ['CLAIMED', (record) => time(record.createdAt)],
  ['SCOPE', (record) => record.scope],
  ['OPERATION', (record) => record.operation],
  ['KEY', (record) => record.key],
  ['STATUS', (record) => `${record.status}${record.expired ? ' (expired)' : ''}`],
  ['ANSWER', (record) => record.responseStatus ?? ''],
];

/** The columns of the unfinished operations. */
export const UNFINISHED_COLUMNS: Column<UnfinishedOperation>[] = [
  ['STATE', (operation) => operation.state],
  ['SCOPE', (operation) => operation.scope],
  ['ROUTE', (operation) => operation.operation],
  ['KEY', (operation) => operation.key],
  ['OPERATION', (operation) => operation.resumes ?? ''],
  ['RECOVERY POINT', (operation) => operation.recoveryPoint ?? ''],
  ['OWNERS', (operation) => operation.attempts],
  ['LEASE UNTIL', (operation) => time(operation.leaseExpiresAt)],
  ['OWNER', (operation) => operation.ownerToken ?? ''],
];

/** The columns of outbox events. */
export const EVENT_COLUMNS: Column<OutboxEventView>[] = [
  ['SEQ', (event) => event.seq],
  ['ID', (event) => event.id],
  ['TYPE', (event) => event.type],
  ['ORDERING KEY', (event) => event.orderingKey ?? ''],
  ['ATTEMPTS', (event) => event.attempts],
  ['LAST ERROR', (event) => event.lastError ?? ''],
];

/** A page as aligned columns (or JSON), and how to ask for the next one. */
export function writePage<Item>(streams: CliStreams, page: AdminPage<Item>, columns: Column<Item>[], json: boolean): void {
  if (json) return streams.out(jsonText(page));
  if (page.items.length === 0) return streams.err(page.next ? `Nothing found in the part searched; the rest: add --cursor ${page.next}` : 'Nothing found.');
  const rows = [columns.map(([header]) => header), ...page.items.map((item) => columns.map(([, value]) => terminalText(value(item))))];
  const widths = columns.map((_, index) => Math.max(...rows.map((row) => row[index].length)));
  for (const row of rows) streams.out(row.map((cell, index) => (index === row.length - 1 ? cell : cell.padEnd(widths[index]))).join('  '));
  if (page.next) streams.err(`${page.partial ? 'The search stopped early, and may find more' : 'More'}: add --cursor ${page.next}`);
}

/** One record in full: what it is, when, and the answer it replays. */
export function writeRecord(streams: CliStreams, record: RecordDetail, json: boolean): void {
  if (json) return streams.out(jsonText(record));
  const facts: Array<[string, unknown]> = [
    ['scope', record.scope],
    ['operation', record.operation],
    ['key', record.key],
    ['key hash', record.keyHash],
    ['status', `${record.status}${record.expired ? ' (expired)' : ''}`],
    ['fingerprint', record.fingerprint],
    ['claimed', time(record.createdAt)],
    ['completed', time(record.completedAt)],
    ['expires', time(record.expiresAt)],
    ['owners', record.attempts],
  ];
  if (record.leaseExpiresAt) facts.push(['lease', `${record.leaseLive ? 'live' : 'lapsed'} until ${time(record.leaseExpiresAt)}, owner ${record.ownerToken ?? 'none'}`]);
  if (record.resume) facts.push(['phased operation', record.resume.operation], ['recovery point', record.recoveryPoint ?? 'none']);
  if (record.failureReason) facts.push(['failure reason', record.failureReason]);
  facts.push(['on release', `${record.effects.external ? 'needs --force. ' : ''}${releaseConsequences(record.status, record.effects)}`]);
  if (record.answer) facts.push(['answer', `${record.answer.status}${record.answer.sealed ? ' (sealed at rest)' : ''} ${JSON.stringify(record.answer.headers)}`], ['body', record.answer.body ?? '(none)']);
  else if (record.undecryptable) facts.push(['answer', `does not open here (${record.undecryptable}): set IDEMPOTENCY_ENCRYPTION_KEYS as the app's keys`]);
  const width = Math.max(...facts.map(([name]) => name.length));
  for (const [name, value] of facts) streams.out(`${name.padEnd(width)}  ${terminalText(value)}`);
}

/** What an action did, in a sentence (or as JSON). */
export function writeResult(streams: CliStreams, result: AdminActionResult, json: boolean): void {
  if (json) return streams.out(jsonText(result));
  if (result.record) streams.out(terminalText(`${result.action === 'release' ? `Released${result.forced ? ' (forced)' : ''}` : 'Marked failed'}: ${result.record.operation} key ${result.record.key} in ${result.record.scope}.`));
  if (result.eventIds) streams.out(`Requeued ${result.eventIds.length} dead letter(s)${result.eventIds.length ? `: ${result.eventIds.join(', ')}` : ''}.`);
}
