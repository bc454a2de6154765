// The built site in a real browser: the home page renders, with the frame
// (repository link, version, changelog, favicon); the search finds
// "Retry-After"; the guides' sidebar reaches every page of docs/ (each renders
// its title); the API reference has a sidebar of its own; the diagrams show.
// Headless Chromium (Debian's, or the one
// CHROMIUM_PATH names), driven by playwright-core, which never downloads a
// browser; without one it skips with a line saying so, as the admin page's
// browser test does.
//
//   node docs/check/site.mjs      (after vitepress build docs)
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const dist = join(root, 'docs/.vitepress/dist');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.svg': 'image/svg+xml', '.png': 'image/png', '.json': 'application/json', '.woff2': 'font/woff2' };

if (!existsSync(CHROMIUM)) {
  console.log(`docs site: skipped the browser checks, no Chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`);
  process.exit(0);
}

/** Serves the built site on loopback, as a static host would (`/page` and `/page.html` alike). */
function serve() {
  const server = createServer((request, response) => {
    const path = normalize(decodeURIComponent(new URL(request.url, 'http://site').pathname)).replace(/^(\.\.[/\\])+/, '');
    const file = [path, `${path}.html`, join(path, 'index.html')].map((candidate) => join(dist, candidate)).find((candidate) => existsSync(candidate) && statSync(candidate).isFile());
    if (!file) return response.writeHead(404).end('not found');
    response.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' }).end(readFileSync(file));
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/** The guides the sidebar must reach: every page of docs/, and the API reference's index. */
const pages = [
  ...readdirSync(join(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => (name === 'index.md' ? '/' : `/${name.replace(/\.md$/, '')}`)),
  '/api/',
].sort();

const problems = [];
const expect = (ok, message) => ok || problems.push(message);

const server = await serve();
const base = `http://127.0.0.1:${server.address().port}`;
const { chromium } = await import('playwright-core');
const profile = mkdtempSync(join(tmpdir(), 'docs-site-chromium-'));
const browser = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, args: ARGS, viewport: { width: 1280, height: 800 } });
try {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (error) => errors.push(error.message));

  // The home page renders, in the site's frame.
  await page.goto(`${base}/`);
  const title = await page.locator('h1').first().textContent({ timeout: 15_000 });
  expect(title?.includes('nest-idempotency'), `the home page's title is ${JSON.stringify(title)}`);
  const { version, repository } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  const repositoryUrl = repository.url.replace(/^git\+/, '').replace(/\.git$/, '');
  expect((await page.locator(`.VPNav a[href="${repositoryUrl}"]`).count()) > 0, `the nav has no link to ${repositoryUrl}`);
  expect((await page.locator('.VPNav').textContent())?.includes(`v${version}`), `the nav does not show v${version}`);
  const icon = await page.locator('head link[rel="icon"]').getAttribute('href');
  expect(icon && existsSync(join(dist, icon)), `the favicon ${icon} is not in the built site`);
  expect(await page.locator('.VPHome').textContent().then((text) => text?.includes('npm install nest-idempotency')), 'the home page does not show the install line');

  // The guides' sidebar reaches every page of docs/.
  await page.goto(`${base}/getting-started`);
  const sidebar = await page.locator('.VPSidebar a.link').evaluateAll((links) => links.map((link) => new URL(link.href).pathname.replace(/\.html$/, '')));
  const reached = [...new Set(sidebar.map((path) => (path === '/index' ? '/' : path)))].sort();
  expect(pages.every((path) => reached.includes(path)), `the sidebar misses ${pages.filter((path) => !reached.includes(path)).join(', ')}`);
  expect(reached.every((path) => pages.includes(path)), `the sidebar links to pages docs/ does not have: ${reached.filter((path) => !pages.includes(path)).join(', ')}`);

  // The search finds the header a 409 and a 503 carry.
  await page.locator('.VPNavBarSearch button').first().click();
  await page.locator('#localsearch-input').fill('Retry-After');
  const results = page.locator('#localsearch-list li');
  await results.first().waitFor({ timeout: 10_000 });
  // The list shows sections' titles: the first one opened must hold the words.
  const found = await results.allTextContents();
  const searchedFrom = page.url();
  await results.first().click();
  // The result opens in the page, without a load: wait for the route to change.
  await page.waitForURL((url) => url.href !== searchedFrom, { timeout: 10_000 }).catch(() => {});
  const leadsToIt = await page.locator('main', { hasText: 'Retry-After' }).first().waitFor({ timeout: 10_000 }).then(() => true, () => false);
  expect(leadsToIt, `the search for Retry-After led to a page without it (results: ${JSON.stringify(found.slice(0, 3))})`);

  // Every page the sidebar reaches renders its title, by a click as a reader would.
  for (const path of pages) {
    // The home page shows no sidebar, the API reference one of its own: come back to the guides'.
    if (/^\/(index(\.html)?)?$|^\/api\//.test(new URL(page.url()).pathname)) await page.goto(`${base}/getting-started`);
    const link = page.locator(`.VPSidebar a.link[href="${path.endsWith('/') ? path : `${path}.html`}"]`).first();
    if (!(await link.count())) {
      expect(false, `no sidebar link reaches ${path}`);
      continue;
    }
    await link.click();
    await page.waitForURL((url) => url.pathname.replace(/\.html$/, '').replace(/\/index$/, '/') === path, { timeout: 10_000 }).catch(() => {});
    const heading = await page.locator('h1').first().textContent({ timeout: 10_000 }).catch(() => null);
    expect(heading, `${path} rendered no title`);
  }

  // The API reference: its own sidebar, a page per export, the pager within it.
  await page.goto(`${base}/api/nest-idempotency/functions/Idempotent`);
  await page.locator('h1').first().waitFor({ timeout: 10_000 });
  const apiSidebar = await page.locator('.VPSidebar a.link').evaluateAll((links) => links.map((link) => new URL(link.href).pathname));
  expect(apiSidebar.includes('/api/') && !apiSidebar.includes('/configuration.html'), `the API reference shows the guides' sidebar: ${apiSidebar.slice(0, 5).join(', ')}`);
  const next = await page.locator('.VPDocFooter .pager-link.next').getAttribute('href').catch(() => null);
  expect(!next || new URL(next, base).pathname.startsWith('/api/'), `the API page's next page is ${next}, outside the reference`);
  const breadcrumbs = await page.locator('main').textContent();
  expect(!breadcrumbs?.includes('nest-idempotency / nest-idempotency'), 'the API page shows breadcrumbs');

  // The diagrams show: each one's SVG loads.
  await page.goto(`${base}/how-it-works`);
  const diagrams = page.locator('img.diagram');
  await diagrams.first().waitFor({ timeout: 10_000 }).catch(() => {});
  const drawn = await diagrams.evaluateAll((images) => images.map((image) => image.complete && image.naturalWidth > 0));
  expect(drawn.length > 0 && drawn.every(Boolean), `how-it-works showed ${drawn.filter(Boolean).length} of ${drawn.length} diagrams`);
  expect(errors.length === 0, `the pages threw: ${errors.join('; ')}`);
} finally {
  await browser.close();
  rmSync(profile, { recursive: true, force: true });
  server.close();
}

if (problems.length > 0) {
  console.error(`docs site: ${problems.length} problems:\n  ${problems.join('\n  ')}`);
  process.exit(1);
}
console.log(`docs site: home page and frame, search for Retry-After, ${pages.length} pages through the sidebar, the API reference's sidebar, diagrams: all render`);
