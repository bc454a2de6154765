import type { AdminCaller } from '../admin.types.js';
import { html, type Markup } from './html.js';

/** What every page knows: where the admin is served (so links survive a global prefix), and who is looking. */
export interface PageContext {
  /** The admin's path as this request reached it, e.g. `/admin/idempotency`. */
  base: string;
  caller: AdminCaller;
}

/** The page's sections, as its navigation names them. */
export type Section = 'records' | 'unfinished' | 'dead' | 'pending';

const SECTIONS: Array<[Section, string, string]> = [
  ['records', 'Records', ''],
  ['unfinished', 'Unfinished operations', '/unfinished'],
  ['dead', 'Dead letters', '/outbox?state=dead'],
  ['pending', 'Pending events', '/outbox?state=pending'],
];

/**
 * The page around every view: navigation, who is signed in and what they
 * may see, and the one stylesheet and script, served by the module itself
 * (no CDN; the Content-Security-Policy allows nothing else).
 */
export function layout(context: PageContext, section: Section | undefined, title: string, content: Markup): Markup {
  const { base, caller } = context;
  const scopes = caller.scopes === 'all' ? 'all scopes' : caller.scopes.length ? caller.scopes.join(', ') : 'no scope';
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · idempotency admin</title>
<link rel="stylesheet" href="${base}/assets/admin.css">
<link rel="icon" href="data:,">
<script src="${base}/assets/admin.js" defer></script>
</head>
<body>
<header>
  <a class="brand" href="${base}">idempotency admin</a>
  <nav>${SECTIONS.map(([name, label, href]) => html`<a href="${base}${href}"${section === name ? html` aria-current="page"` : ''}>${label}</a>`)}</nav>
  <span class="caller" title="who the admin's guard let in, and what they may see">${caller.actor || 'no name: reading only'} · ${scopes}</span>
</header>
<main>
<h1>${title}</h1>
${content}
</main>
</body>
</html>`;
}

/**
 * An action's form: hidden fields naming the target, a required reason, and
 * a button the script enables. The script asks for confirmation (in the
 * words of `confirmForced` when the form's force box is checked), posts the
 * form as JSON to the API and shows the answer; without it the page stays
 * readable, and the button says what is missing.
 */
export function actionForm(
  context: PageContext,
  action: 'release' | 'fail' | 'requeue',
  fields: Record<string, string>,
  options: { confirm: string; confirmForced?: string; button: Markup | string; done: string; extra?: Markup },
): Markup {
  const forced = options.confirmForced === undefined ? '' : html` data-confirm-forced="${options.confirmForced}"`;
  return html`<form class="action" method="post" action="${context.base}/api/${action}" data-action="${action}" data-confirm="${options.confirm}"${forced} data-done="${options.done}">
  ${Object.entries(fields).map(([name, value]) => html`<input type="hidden" name="${name}" value="${value}">`)}
  ${options.extra}
  <label>Reason (recorded with your name) <textarea name="reason" required maxlength="1000" rows="2"></textarea></label>
  <button type="submit" disabled data-needs-script>${options.button}</button>
  <noscript><p class="note">Actions need JavaScript in this page (reading does not); scripts can use the JSON API: POST ${context.base}/api/${action}.</p></noscript>
  <p class="result" role="status" data-result></p>
</form>`;
}

/** A pager's link to the next page, keeping the filters. */
export function nextLink(href: string | undefined): Markup {
  return href ? html`<p class="pager"><a href="${href}" rel="next">Next page →</a></p>` : html``;
}
