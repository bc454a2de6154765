import { existsSync, readFileSync } from 'node:fs';
import { defineConfig, type DefaultTheme } from 'vitepress';
import pkg from '../../package.json' with { type: 'json' };
import { diagramFile, diagramTitle } from './diagrams/names.mjs';
import { githubSlug } from './github-slug.js';

/** The guides, in the order a newcomer reads them; the sidebar, and docs:check's walk of it, come from here. */
export const sidebar: DefaultTheme.SidebarItem[] = [
  {
    text: 'Start',
    items: [
      { text: 'Overview', link: '/' },
      { text: 'Getting started', link: '/getting-started' },
      { text: 'How it works', link: '/how-it-works' },
      { text: 'Compared with other modules', link: '/comparison' },
    ],
  },
  {
    text: 'Building with it',
    items: [
      { text: 'Configuration', link: '/configuration' },
      { text: 'The HTTP contract', link: '/http-contract' },
      { text: 'Writing business code', link: '/business-code' },
      { text: 'External side effects', link: '/side-effects' },
      { text: 'Outbox and messaging', link: '/outbox' },
      { text: 'GraphQL', link: '/graphql' },
      { text: 'Testing your routes', link: '/testing' },
    ],
  },
  {
    text: 'Running it',
    items: [
      { text: 'Operations', link: '/operations' },
      { text: 'The admin page and CLI', link: '/admin' },
      { text: 'Security', link: '/security' },
      { text: 'Performance', link: '/performance' },
      { text: 'Scaling out', link: '/scaling-out' },
      { text: 'Upgrading and compatibility', link: '/upgrading' },
    ],
  },
  {
    text: 'Reference',
    items: [
      { text: 'API reference', link: '/api/' },
      { text: 'Changelog', link: '/changelog' },
      { text: 'Internals', link: '/internals' },
      { text: 'The code\'s map', link: '/architecture' },
      { text: 'The demo app', link: '/demo' },
    ],
  },
];

/** The API reference's own sidebar: its entry points, as TypeDoc wrote them (npm run docs:api). */
function apiSidebar(): DefaultTheme.SidebarItem[] {
  const generated = new URL('../api/typedoc-sidebar.json', import.meta.url);
  const entryPoints = existsSync(generated) ? (JSON.parse(readFileSync(generated, 'utf8')) as DefaultTheme.SidebarItem[]) : [];
  return [
    { text: 'API reference', items: [{ text: 'Entry points', link: '/api/' }, ...entryPoints] },
    { text: 'Guides', items: [{ text: 'Back to the guides', link: '/getting-started' }] },
  ];
}

/** https://github.com/owner/name, from package.json's `repository`. */
const repository = pkg.repository.url.replace(/^git\+/, '').replace(/\.git$/, '');

export default defineConfig({
  title: 'nest-idempotency',
  description: pkg.description,
  head: [['link', { rel: 'icon', type: 'image/svg+xml', href: '/favicon.svg' }]],
  // The pages are read on GitHub too: anchors are GitHub's, so one link works in both places.
  markdown: {
    anchor: { slugify: githubSlug },
    config(md) {
      // Mermaid blocks show as the SVG rendered from them (diagrams/render.mjs); GitHub renders the blocks itself.
      const fence = md.renderer.rules.fence!;
      md.renderer.rules.fence = (tokens, index, options, env, self) => {
        const { info, content } = tokens[index];
        if (info.trim() !== 'mermaid') return fence(tokens, index, options, env, self);
        const file = diagramFile(content);
        if (!existsSync(new URL(`../public/diagrams/${file}`, import.meta.url))) {
          throw new Error(`${env.relativePath}: a Mermaid diagram has no rendered SVG (${file}): run npm run docs:diagrams and commit docs/public/diagrams`);
        }
        return `<p><img class="diagram" src="/diagrams/${file}" alt="${md.utils.escapeHtml(diagramTitle(content))}"></p>\n`;
      };
    },
  },
  themeConfig: {
    logo: '/favicon.svg',
    nav: [
      { text: 'Guide', link: '/getting-started', activeMatch: '^/(?!api/)' },
      { text: 'API', link: '/api/', activeMatch: '^/api/' },
      { text: `v${pkg.version}`, items: [{ text: 'Changelog', link: '/changelog' }] },
    ],
    sidebar: { '/api/': apiSidebar(), '/': sidebar },
    socialLinks: [{ icon: 'github', link: repository }],
    search: {
      provider: 'local',
      options: {
        // The index is one file the search box loads whole. Of the API
        // reference it holds each page's title (a class, a function, a type),
        // not its members: their 3,000 sections made the index 1.2 MB.
        _render(src, env, md) {
          const html = md.render(src, env);
          return env.relativePath.startsWith('api/') ? (/<h1[^>]*>[\s\S]*?<\/h1>/.exec(html)?.[0] ?? '') : html;
        },
      },
    },
    outline: { level: [2, 3] },
  },
});
