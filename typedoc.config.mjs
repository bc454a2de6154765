// The API reference: TypeDoc (0.28, which supports TypeScript 6.0) renders the
// JSDoc of every entry point as Markdown pages under docs/api/, which
// VitePress builds into the site (npm run docs:build). A public export
// without a doc comment fails the build. typedoc-vitepress-theme writes the
// reference's own sidebar (docs/api/typedoc-sidebar.json, read by
// docs/.vitepress/config.ts) and makes its anchors VitePress's.
/** @type {Partial<import('typedoc').TypeDocOptions & import('typedoc-plugin-markdown').PluginOptions>} */
export default {
  entryPoints: [
    'src/idempotency/index.ts',
    'src/idempotency/outbox/index.ts',
    'src/idempotency/admin/index.ts',
    'src/idempotency/messaging/index.ts',
    'src/idempotency/graphql/index.ts',
    'src/idempotency/phases/index.ts',
    'src/idempotency/metrics/index.ts',
    'src/idempotency/nats/index.ts',
    'src/idempotency/tracing/index.ts',
    'src/client/index.ts',
    'src/testing/index.ts',
  ],
  tsconfig: 'tsconfig.lib.json',
  plugin: ['typedoc-plugin-markdown', 'typedoc-vitepress-theme'],
  out: 'docs/api',
  docsRoot: 'docs',
  sidebar: { collapsed: true, pretty: true },
  // The eleven entry points side by side in the sidebar, each with its classes,
  // interfaces, functions... (not the subpaths nested in the core's folder).
  navigation: { includeGroups: true, includeFolders: false },
  readme: 'none',
  entryFileName: 'index',
  // The site's frame names the page: no breadcrumbs, and the index titled as
  // the sidebar titles it, its entry points in a table with each one's
  // @module sentence.
  hideBreadcrumbs: true,
  pageTitleTemplates: { index: 'API reference' },
  indexFormat: 'table',
  // What an app imports: the package and its subpaths, not TypeDoc's "modules".
  locales: { en: { kind_plural_module: 'Entry points', kind_module: 'Entry point' } },
  excludePrivate: true,
  excludeInternal: true,
  // Every export, and the methods of exported classes and interfaces, needs a
  // doc comment; their properties are read in the option tables of the guides.
  requiredToBeDocumented: ['Enum', 'Variable', 'Function', 'Class', 'Interface', 'TypeAlias', 'Namespace'],
  // forRoot() and forRootAsync() of these modules come from Nest's
  // ConfigurableModuleBuilder, typed by it, with no declaration here to
  // comment; docs/configuration.md, docs/outbox.md and docs/admin.md describe them.
  intentionallyNotDocumented: [
    'nest-idempotency/outbox.IdempotencyOutboxModule.forRootAsync',
    'nest-idempotency/admin.IdempotencyAdminModule.forRoot',
    'nest-idempotency/admin.IdempotencyAdminModule.forRootAsync',
  ],
  // Types that public signatures name but the entry points do not export
  // (constructor parameters of injectable classes, internal option shapes)
  // are shown by name, unlinked.
  validation: { notExported: false, invalidLink: true, invalidPath: true, notDocumented: true },
  treatWarningsAsErrors: true,
  // No "Defined in" links: a checkout's remote (none, or a local path in a CI clone) is no URL a reader can open.
  disableSources: true,
};
