/**
 * The page's script, whole: it enables the action buttons, asks for
 * confirmation, posts the form as JSON to the API (the admin takes actions
 * as JSON only) and shows the answer, then goes where the form says. The
 * page reads without it.
 */
export const ADMIN_SCRIPT = `'use strict';
for (const button of document.querySelectorAll('[data-needs-script]')) button.disabled = false;
document.addEventListener('submit', async (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || !form.dataset.action) return;
  event.preventDefault();
  const body = {};
  for (const [name, value] of new FormData(form, event.submitter)) {
    if (name === 'ids') (body.ids = body.ids || []).push(value);
    else body[name] = value;
  }
  if (form.dataset.action === 'requeue' && !body.all && !body.ids) return show(form, 'Select the dead letters to requeue.', false);
  const question = (body.force && form.dataset.confirmForced) || (event.submitter && event.submitter.dataset.confirm) || form.dataset.confirm;
  if (!window.confirm(question + '\\n\\nReason: ' + body.reason)) return;
  const response = await fetch(form.action, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify(body),
    credentials: 'same-origin',
  });
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) return show(form, answer.detail || answer.message || 'Refused: ' + response.status, false);
  const count = answer.eventIds ? ' (' + answer.eventIds.length + ')' : '';
  show(form, 'Done' + count + '.', true);
  setTimeout(() => location.assign(form.dataset.done), 700);
});
function show(form, text, done) {
  const result = form.querySelector('[data-result]');
  result.textContent = text;
  result.className = 'result ' + (done ? 'done' : 'refused');
}
`;

/** The page's stylesheet. */
export const ADMIN_STYLES = `:root { color-scheme: light; --ink: #1d232b; --muted: #5b6573; --line: #d9dee5; --accent: #1f5fbf; --bad: #a8231b; --good: #1d7a3a; --warn: #9a6200; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink); background: #f6f7f9; }
header { display: flex; gap: 1.5rem; align-items: center; padding: .6rem 1.2rem; background: #1d232b; color: #fff; flex-wrap: wrap; }
header a { color: #cfd8e3; text-decoration: none; }
header a[aria-current] { color: #fff; border-bottom: 2px solid #fff; }
header nav { display: flex; gap: 1rem; }
.brand { font-weight: 600; color: #fff !important; }
.caller { margin-left: auto; color: #cfd8e3; font-size: 12px; }
main { padding: 1rem 1.2rem 3rem; max-width: 1400px; }
h1 { font-size: 20px; margin: .2rem 0 1rem; word-break: break-all; }
h2 { font-size: 16px; margin: 1.6rem 0 .5rem; }
h3 { font-size: 14px; margin: 1rem 0 .2rem; }
form.search { display: flex; gap: .6rem; flex-wrap: wrap; align-items: end; margin-bottom: 1rem; }
label { display: flex; flex-direction: column; font-size: 12px; color: var(--muted); gap: .2rem; }
input, select, textarea, button { font: inherit; padding: .35rem .5rem; border: 1px solid var(--line); border-radius: 4px; background: #fff; color: var(--ink); }
textarea { width: min(40rem, 100%); }
button { background: var(--accent); color: #fff; border-color: var(--accent); cursor: pointer; }
button[disabled] { opacity: .5; cursor: not-allowed; }
table { border-collapse: collapse; width: 100%; background: #fff; border: 1px solid var(--line); }
th, td { text-align: left; padding: .35rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; overflow-wrap: break-word; }
th { background: #eef1f5; font-weight: 600; font-size: 12px; white-space: nowrap; }
table.headers { width: auto; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .3rem 1rem; background: #fff; border: 1px solid var(--line); padding: .8rem; margin: 0; }
dt { color: var(--muted); }
dd { margin: 0; word-break: break-all; }
pre.body { background: #fff; border: 1px solid var(--line); padding: .6rem; overflow: auto; max-height: 24rem; }
.status { display: inline-block; white-space: nowrap; padding: 0 .4rem; border-radius: 3px; font-size: 12px; background: #e6e9ee; }
.status.completed { background: #dcf1e2; color: var(--good); }
.status.failed, .status.expired { background: #f7dedc; color: var(--bad); }
.status.in_progress, .status.running { background: #fdf0d5; color: var(--warn); }
.status.abandoned, .status.unstarted { background: #f7dedc; color: var(--bad); }
form.action { background: #fff; border: 1px solid var(--line); padding: .8rem; display: flex; flex-direction: column; gap: .6rem; align-items: start; }
form.action label { align-self: stretch; }
.warning { background: #fdf0d5; border-left: 3px solid var(--warn); padding: .5rem .8rem; max-width: 60rem; }
form.action label.force { flex-direction: row; align-items: center; gap: .4rem; color: var(--bad); font-size: 14px; }
.result.done, p.done { color: var(--good); font-weight: 600; }
.result.refused { color: var(--bad); font-weight: 600; }
.empty, .note { color: var(--muted); }
.pager { margin-top: .8rem; }
`;
