import type { AdminPage, OutboxEventView, OutboxQuery, UnfinishedOperation, UnfinishedQuery } from '../admin.types.js';
import { html, type Markup, query, when } from './html.js';
import { actionForm, layout, nextLink, type PageContext } from './page-layout.js';
import { NO_ACTOR } from './records.page.js';

const STATES: Record<UnfinishedOperation['state'], string> = {
  running: 'running: its owner holds the lease',
  abandoned: 'abandoned: a retry, or the completer of a process that registers its operation, resumes it',
  unstarted: 'never started: the completer discards it',
};

/** Phased operations that started and never finished, and why. */
export function unfinishedPage(context: PageContext, asked: UnfinishedQuery, found: AdminPage<UnfinishedOperation>): Markup {
  const { base } = context;
  const form = html`<form class="search" method="get" action="${base}/unfinished">
  <label>Tenant scope <input name="scope" value="${asked.scope}" placeholder="tenant:acme"></label>
  <label>Operation <input name="operation" value="${asked.operation}"></label>
  <button type="submit">Filter</button>
</form>`;
  const rows = found.items.map((operation) => {
    const waits = operation.state === 'abandoned' && operation.registeredHere === false ? html`<br><em>this process does not register ${operation.resumes}: the completer here leaves it alone</em>` : '';
    return html`<tr>
  <td><span class="status ${operation.state}">${operation.state}</span></td>
  <td>${operation.scope}</td><td>${operation.operation}</td>
  <td><a href="${base}/record${query({ scope: operation.scope, operation: operation.operation, key: operation.key })}">${operation.key}</a></td>
  <td>${operation.resumes ?? '—'}</td><td>${operation.recoveryPoint ?? '—'}</td><td>${operation.attempts}</td>
  <td>${when(operation.leaseExpiresAt)}<br><small>${operation.ownerToken}</small></td>
  <td>${STATES[operation.state]}${waits}</td>
</tr>`;
  });
  const table = found.items.length
    ? html`<table><thead><tr><th>State</th><th>Scope</th><th>Route</th><th>Key</th><th>Operation</th><th>Recovery point</th><th>Owners</th><th>Lease until / owner</th><th>Why</th></tr></thead><tbody>${rows}</tbody></table>`
    : html`<p class="empty">No phased operation is unfinished.</p>`;
  const next = found.next ? `${base}/unfinished${query({ scope: asked.scope, operation: asked.operation, cursor: found.next })}` : undefined;
  return layout(context, 'unfinished', 'Unfinished operations', html`${form}${table}${nextLink(next)}`);
}

/** Outbox events in one state; dead letters can be requeued, selected or all. */
export function outboxPage(context: PageContext, asked: OutboxQuery, found: AdminPage<OutboxEventView>): Markup {
  const { base } = context;
  const dead = asked.state === 'dead';
  const rows = found.items.map(
    (event) => html`<tr>
  ${dead ? html`<td><input type="checkbox" name="ids" value="${event.id}" aria-label="select ${event.id}"></td>` : ''}
  <td>${event.seq}</td><td><code>${event.id}</code></td><td>${event.type}</td><td>${event.orderingKey ?? '—'}</td><td>${event.attempts}</td>
  <td>${event.lastError ?? ''}</td><td>${when(event.createdAt)}</td><td>${dead ? when(event.settledAt) : when(event.nextAttemptAt)}</td>
</tr>`,
  );
  const head = html`<tr>${dead ? html`<th></th>` : ''}<th>Seq</th><th>Id</th><th>Type</th><th>Ordering key</th><th>Attempts</th><th>Last error</th><th>Created</th><th>${dead ? 'Dead since' : 'Next attempt'}</th></tr>`;
  const table = html`<table><thead>${head}</thead><tbody>${rows}</tbody></table>`;
  const next = found.next ? `${base}/outbox${query({ state: asked.state, cursor: found.next })}` : undefined;
  if (!found.items.length) return layout(context, asked.state, dead ? 'Dead letters' : 'Pending events', html`<p class="empty">${dead ? 'No dead letter.' : 'No event waits for the relay.'}</p>`);
  if (!dead) return layout(context, 'pending', 'Pending events', html`${table}${nextLink(next)}`);
  if (!context.caller.actor) return layout(context, 'dead', 'Dead letters', html`${table}${NO_ACTOR}${nextLink(next)}`);
  const all = html`<button type="submit" name="all" value="true" disabled data-needs-script data-confirm="Requeue every dead letter?">Requeue all dead letters</button>`;
  const form = actionForm(context, 'requeue', {}, {
    confirm: 'Requeue the selected dead letters? Older dead letters of their ordering keys must be among them.',
    button: 'Requeue selected',
    done: `${base}/outbox?state=dead`,
    extra: html`${table}${all}`,
  });
  return layout(context, 'dead', 'Dead letters', html`<p>The relay gave up on these after its attempts. Requeued, they are published again, oldest first within each ordering key.</p>${form}${nextLink(next)}`);
}
