import type { AdminPage, RecordDetail, RecordQuery, RecordSummary } from '../admin.types.js';
import { releaseConsequences } from '../run-effects.js';
import { html, type Markup, query, when } from './html.js';
import { actionForm, layout, nextLink, type PageContext } from './page-layout.js';

const STATUSES = ['', 'in_progress', 'completed', 'failed'];

/** In place of the actions, for a caller the admin's `actor` names nobody for: each action's audit line names who took it. */
export const NO_ACTOR = html`<p class="note">Actions need a name for their audit line, and the admin's <code>actor</code> option names nobody for this request: sign in, or set <code>actor</code> (IdempotencyAdminModule).</p>`;

/** `datetime-local` wants `YYYY-MM-DDTHH:MM`; the page's times are UTC. */
const local = (date: Date | undefined) => (date ? date.toISOString().slice(0, 16) : '');

/** The search form and the records found, newest claim first. */
export function recordsPage(context: PageContext, asked: RecordQuery, found: AdminPage<RecordSummary>, released = false): Markup {
  const { base, caller } = context;
  const filters = { scope: asked.scope, operation: asked.operation, key: asked.key, status: asked.status, since: local(asked.since), until: local(asked.until) };
  const form = html`<form class="search" method="get" action="${base}">
  <label>Tenant scope <input name="scope" value="${asked.scope}" placeholder="tenant:acme" list="scopes"></label>
  ${caller.scopes === 'all' ? '' : html`<datalist id="scopes">${caller.scopes.map((scope) => html`<option value="${scope}">`)}</datalist>`}
  <label>Operation <input name="operation" value="${asked.operation}" placeholder="METHOD /route/:param"></label>
  <label>Key <input name="key" value="${asked.key}"></label>
  <label>Status <select name="status">${STATUSES.map((status) => html`<option value="${status}"${status === (asked.status ?? '') ? html` selected` : ''}>${status || 'any'}</option>`)}</select></label>
  <label>Claimed from (UTC) <input type="datetime-local" name="since" value="${filters.since}"></label>
  <label>to (UTC) <input type="datetime-local" name="until" value="${filters.until}"></label>
  <button type="submit">Find</button>
</form>`;
  const rows = found.items.map(
    (record) => html`<tr>
  <td>${when(record.createdAt)}</td><td>${record.scope}</td><td>${record.operation}</td>
  <td><a href="${base}/record${query({ scope: record.scope, operation: record.operation, key: record.key })}">${record.key}</a></td>
  <td><span class="status ${record.status}">${record.status}</span>${record.expired ? html` <span class="status expired">expired</span>` : ''}</td>
  <td>${record.responseStatus}</td><td>${when(record.expiresAt)}</td>
</tr>`,
  );
  const table = found.items.length
    ? html`<table><thead><tr><th>Claimed</th><th>Scope</th><th>Operation</th><th>Key</th><th>Status</th><th>Answer</th><th>Expires</th></tr></thead><tbody>${rows}</tbody></table>`
    : html`<p class="empty">No record matches${found.partial ? (asked.key ? ' in the scopes searched so far' : ' among these claims') : ''}.</p>`;
  const next = found.next ? `${base}${query({ ...filters, cursor: found.next })}` : undefined;
  const window = asked.key
    ? 'The search stopped early: a key searched in every scope walks a window of their scopes and operations per page; the next page walks the following ones.'
    : 'The search reads a window of claims per page, newest first; the next page searches older ones.';
  const partial = found.partial ? html`<p class="note">${window}</p>` : '';
  return layout(context, 'records', 'Records', html`${released ? releasedNote(asked) : ''}${form}${table}${partial}${nextLink(next)}`);
}

/** Where a release lands: the list of the released key's records, which says what was released. */
function releasedNote(asked: RecordQuery): Markup {
  return html`<p class="done" role="status">Released key ${asked.key} of ${asked.scope} (${asked.operation}): its record is deleted, and the next request with this key runs the operation anew.</p>`;
}

/** One record: its request's fingerprint, status, answer and timings, and the actions it allows. */
export function recordPage(context: PageContext, record: RecordDetail): Markup {
  // A one-transaction flow claims and completes in one transaction, whose now() dates both.
  const took = record.completedAt?.getTime() === record.createdAt.getTime() ? 'in the claim\'s transaction' : `${(record.completedAt?.getTime() ?? 0) - record.createdAt.getTime()} ms after the claim`;
  const facts: Array<[string, Markup | string | number | null]> = [
    ['Scope', record.scope],
    ['Operation', record.operation],
    ['Key', record.key],
    ['Key hash (as in logs and events)', record.keyHash],
    ['Status', html`<span class="status ${record.status}">${record.status}</span>`],
    ['Request fingerprint', html`<code>${record.fingerprint}</code>`],
    ['Claimed', when(record.createdAt)],
    ['Completed', record.completedAt ? `${when(record.completedAt)} (${took})` : 'not yet'],
    ['Expires', `${when(record.expiresAt)}${record.expired ? ' (expired: the next request with this key runs anew)' : ''}`],
    ['Owners (attempts)', record.attempts],
  ];
  if (record.leaseExpiresAt) facts.push(['Lease', `${record.leaseLive ? 'live' : 'lapsed'}, until ${when(record.leaseExpiresAt)}, owner ${record.ownerToken ?? 'none'}`]);
  if (record.resume) facts.push(['Phased operation', record.resume.operation]);
  if (record.recoveryPoint || record.effects.phases.length) facts.push(['Recovery point', `${record.recoveryPoint ?? 'none'} (finished, in order: ${record.effects.phases.join(', ') || 'none'})`]);
  if (record.failureReason) facts.push(['Failure reason', record.failureReason]);
  const list = html`<dl>${facts.map(([name, value]) => html`<dt>${name}</dt><dd>${value}</dd>`)}</dl>`;
  return layout(context, 'records', `${record.operation} · ${record.key}`, html`${list}${answerOf(record)}${record.resume ? inputOf(record) : ''}${actionsOf(context, record)}`);
}

function answerOf(record: RecordDetail): Markup {
  if (record.undecryptable) return html`<h2>Answer</h2><p class="note">The recorded answer does not open here (${record.undecryptable}): see "Encryption at rest" in the documentation (docs/security.md).</p>`;
  if (!record.answer) return html`<h2>Answer</h2><p class="empty">None recorded yet.</p>`;
  const { status, headers, body, sealed } = record.answer;
  return html`<h2>Answer</h2>
<p>Status <strong>${status}</strong>${sealed ? ' · stored sealed (encryption at rest), opened for this page' : ''}</p>
<table class="headers">${Object.entries(headers).map(([name, value]) => html`<tr><th>${name}</th><td>${value}</td></tr>`)}</table>
<pre class="body">${body === null ? '(no body)' : pretty(body)}</pre>`;
}

function inputOf(record: RecordDetail): Markup {
  return html`<h2>Stored input and phase results</h2><pre class="body">${JSON.stringify({ input: record.resume?.input, phases: record.phaseResults }, null, 2)}</pre>`;
}

/** Release and mark failed, where the record allows them; the server checks again, on the database's clock. */
function actionsOf(context: PageContext, record: RecordDetail): Markup {
  const id = { scope: record.scope, operation: record.operation, key: record.key };
  if (!context.caller.actor) return html`<h2>Actions</h2>${NO_ACTOR}`;
  if (record.status === 'in_progress' && record.leaseLive) {
    return html`<h2>Actions</h2><p class="note">Its owner holds a live lease until ${when(record.leaseExpiresAt)}: nothing can be done until it finishes or the lease lapses.</p>`;
  }
  const forms: Markup[] = [releaseOf(context, record, id)];
  if (record.status === 'in_progress') {
    forms.push(html`<h3>Mark failed</h3><p>Records the operation as failed: every retry gets the operation-failed problem until the record expires.</p>
${actionForm(context, 'fail', id, { confirm: `Mark ${record.operation} key ${record.key} of ${record.scope} failed? Retries will no longer resume it.`, button: 'Mark failed', done: `${context.base}/record${query(id)}` })}`);
  }
  return html`<h2>Actions</h2>${forms}`;
}

/**
 * The release, with what it leaves in place and what a retry after it does.
 * Where the run may have had external effects, the form has a force box: the
 * API refuses the release without it, and the confirmation repeats the warning.
 */
function releaseOf(context: PageContext, record: RecordDetail, id: Record<string, string>): Markup {
  const consequences = releaseConsequences(record.status, record.effects);
  const options = { confirm: `Release key ${record.key} of ${record.scope} (${record.operation})? Its record is deleted.`, button: 'Release key', done: `${context.base}${query({ ...id, released: 'true' })}` };
  if (!record.effects.external) return html`<h3>Release the key</h3><p>${consequences}</p>${actionForm(context, 'release', id, options)}`;
  const force = html`<label class="force"><input type="checkbox" name="force" value="true"> Force the release: a request with this key after it does all of this again</label>`;
  const confirmForced = `Force the release of key ${record.key} of ${record.scope} (${record.operation})?\n\n${consequences}`;
  return html`<h3>Release the key</h3><p class="warning">${consequences}</p>${actionForm(context, 'release', id, { ...options, confirmForced, extra: force })}`;
}

/** A JSON body indented for reading; any other text as it is. */
function pretty(body: string): string {
  try {
    return JSON.stringify(JSON.parse(body), null, 2);
  } catch {
    return body;
  }
}
