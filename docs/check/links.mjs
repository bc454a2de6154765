// Every internal link of the built site, and every relative link of the
// README, must reach a page and, when it names one, an anchor on it; every
// diagram's SVG must be one a page shows.
// VitePress fails the build on a link to a missing page; anchors it does not
// check, and the README is not part of the site.
//
//   node docs/check/links.mjs      (after vitepress build docs)
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const dist = join(root, 'docs/.vitepress/dist');

/** Every .html file under a folder. */
function htmlFiles(dir) {
  return readdirSync(dir, { recursive: true })
    .map((name) => join(dir, name))
    .filter((path) => path.endsWith('.html') && statSync(path).isFile());
}

const ids = new Map();
/** The ids of a built page's elements: what a #fragment can reach. */
function idsOf(file) {
  if (!ids.has(file)) ids.set(file, new Set([...readFileSync(file, 'utf8').matchAll(/\sid="([^"]+)"/g)].map(([, id]) => decodeEntities(id))));
  return ids.get(file);
}
const decodeEntities = (text) => text.replace(/&amp;/g, '&').replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>');

/** The built file a site path names (`/x`, `/x.html`, `/dir/`), or undefined. */
function builtFile(path) {
  const clean = decodeURIComponent(path).replace(/^\//, '');
  for (const candidate of [clean, `${clean}.html`, join(clean, 'index.html')]) {
    const file = join(dist, candidate);
    if (existsSync(file) && statSync(file).isFile()) return file;
  }
  return undefined;
}

const broken = [];
let checked = 0;

/** Checks that `href`, found in `from`, reaches a page (and its anchor). `base` resolves relative paths. */
function check(from, href, resolvePage) {
  const [path, fragment] = href.split('#');
  const file = resolvePage(path);
  checked++;
  if (!file) return broken.push(`${from}: ${href} reaches no page`);
  if (fragment && file.endsWith('.html') && !idsOf(file).has(decodeURIComponent(fragment))) broken.push(`${from}: ${href} names no anchor #${fragment} on ${relative(root, file)}`);
}

if (!existsSync(dist)) throw new Error('no built site: run `npx vitepress build docs` first');
for (const file of htmlFiles(dist)) {
  const page = relative(dist, file);
  const html = readFileSync(file, 'utf8');
  for (const [, raw] of html.matchAll(/<a\s[^>]*?href="([^"]*)"/g)) {
    const href = decodeEntities(raw);
    if (/^[a-z]+:/i.test(href) || href.startsWith('//')) continue; // outside the site
    const sitePath = (path) => (path === '' ? file : builtFile(path.startsWith('/') ? path : relative(dist, resolve(dirname(file), path))));
    check(page, href, sitePath);
  }
}

// The README links into docs/ (as GitHub shows it): each docs/<page>.md#anchor must exist in the built page.
const readme = readFileSync(join(root, 'README.md'), 'utf8').replace(/^```[\s\S]*?^```/gm, '');
for (const [, href] of readme.matchAll(/\]\(([^)\s]+)\)/g)) {
  if (/^[a-z]+:/i.test(href)) continue;
  check('README.md', href, (path) => {
    if (path === '') return join(root, 'README.md');
    if (/^docs\/.+\.md$/.test(path)) return builtFile(path.slice('docs/'.length).replace(/\.md$/, '').replace(/(^|\/)index$/, '$1'));
    return existsSync(join(root, path)) ? join(root, path) : undefined;
  });
}

// The README's anchors within itself, as GitHub makes them.
const readmeAnchors = new Set([...readme.matchAll(/^#+ (.+)$/gm)].map(([, heading]) => githubSlug(heading)));
for (const [, anchor] of readme.matchAll(/\]\(#([^)]+)\)/g)) if (!readmeAnchors.has(anchor)) broken.push(`README.md: #${anchor} names no heading of the README`);

// The README keeps the comparison table of docs/comparison.md: the two must not drift (links aside, which differ in form, or are the page's alone).
const tableOf = (text) => text.split('\n').filter((line) => line.startsWith('| ')).map((line) => line.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1'));
const comparison = (text) => tableOf(text.slice(text.indexOf('Compared with the other NestJS idempotency modules')).split(/\n#+ /)[0]);
const readmeTable = comparison(readme);
const pageTable = comparison(readFileSync(join(root, 'docs/comparison.md'), 'utf8'));
if (readmeTable.length === 0 || readmeTable.join('\n') !== pageTable.join('\n')) broken.push('README.md: its comparison table differs from docs/comparison.md\'s');

// Every rendered diagram is one a page shows: an SVG whose Mermaid block changed or went stays behind until docs:diagrams runs again.
const shown = new Set(htmlFiles(dist).flatMap((file) => [...readFileSync(file, 'utf8').matchAll(/src="\/diagrams\/([^"]+)"/g)].map(([, name]) => name)));
for (const name of readdirSync(join(root, 'docs/public/diagrams'))) if (!shown.has(name)) broken.push(`docs/public/diagrams/${name}: no page shows it; run npm run docs:diagrams`);

function githubSlug(heading) {
  return heading.trim().toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-');
}

if (broken.length > 0) {
  console.error(`docs links: ${broken.length} broken of ${checked}:\n  ${broken.join('\n  ')}`);
  process.exit(1);
}
console.log(`docs links: ${checked} links checked, none broken`);
