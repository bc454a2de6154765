import { defineConfig } from 'vitepress';
import { githubSlug } from './github-slug.js';

/** The guides, in the order a newcomer reads them; the sidebar, and docs:check's walk of it, come from here. */
export const sidebar = [
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
      { text: 'Internals', link: '/internals' },
      { text: 'The code\'s map', link: '/architecture' },
      { text: 'The demo app', link: '/demo' },
    ],
  },
];

export default defineConfig({
  title: 'nest-idempotency',
  description: 'Idempotency keys for NestJS on PostgreSQL: the claim, the business writes and the recorded outcome in one transaction.',
  // The pages are read on GitHub too: anchors are GitHub's, so one link works in both places.
  markdown: {
    anchor: { slugify: githubSlug },
    config(md) {
      // Mermaid blocks render in the browser (theme/index.ts), as GitHub renders them.
      const fence = md.renderer.rules.fence!;
      md.renderer.rules.fence = (tokens, index, options, env, self) =>
        tokens[index].info.trim() === 'mermaid'
          ? `<pre class="mermaid" v-pre>${md.utils.escapeHtml(tokens[index].content)}</pre>\n`
          : fence(tokens, index, options, env, self);
    },
  },
  themeConfig: {
    nav: [
      { text: 'Guide', link: '/getting-started' },
      { text: 'API', link: '/api/' },
    ],
    sidebar,
    search: { provider: 'local' },
    outline: { level: [2, 3] },
  },
});
