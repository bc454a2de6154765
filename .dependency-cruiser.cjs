// npm run lint:deps: the import rules of src/. docs/architecture.md draws the
// layers below and says what each folder holds; test/architecture.spec.ts
// holds that page to this list.
//
// The layers of src/idempotency, from the top: a file may import from its own
// layer and the layers below it, never from a layer above. Folders in one
// layer may import one another.
const LAYERS = [
  { name: 'entry', folders: ['cli'], files: ['index.ts'] },
  { name: 'wiring', folders: ['module', 'admin'] },
  { name: 'integrations', folders: ['openapi', 'metrics', 'tracing', 'nats'] },
  { name: 'edges', folders: ['http', 'graphql', 'messaging', 'phases'] },
  { name: 'flows', folders: ['flow', 'reaper', 'outbox'] },
  { name: 'foundation', folders: ['transactions', 'driver', 'records', 'events', 'outcome', 'options'] },
  { name: 'pure', folders: ['errors', 'fingerprint'] },
];

const ROOT = '^src/idempotency/';
const pathsOf = (layer) => [...layer.folders.map((folder) => `${ROOT}${folder}/`), ...(layer.files ?? []).map((file) => `${ROOT}${file.replace('.', '\\.')}$`)];

const upwards = LAYERS.slice(1).map((layer, index) => ({
  name: `layer-${layer.name}`,
  comment: `${layer.name} (${layer.folders.join(', ')}) imports from a layer above it: move the shared piece down, or hand it in from above.`,
  severity: 'error',
  from: { path: pathsOf(layer) },
  to: { path: LAYERS.slice(0, index + 1).flatMap(pathsOf) },
}));

module.exports = {
  forbidden: [
    { name: 'no-circular', comment: 'An import cycle.', severity: 'error', from: {}, to: { circular: true } },
    {
      name: 'in-a-layer',
      comment: 'Every file of src/idempotency sits in a folder of a layer (index.ts aside): add a new folder to LAYERS and to docs/architecture.md.',
      severity: 'error',
      from: { path: ROOT, pathNot: [...LAYERS.flatMap(pathsOf), `${ROOT}[^/]+\\.spec\\.ts$`] },
      to: {},
    },
    ...upwards,
    {
      name: 'module-not-demo',
      comment: 'The package imports nothing from the demo app.',
      severity: 'error',
      from: { path: '^(src/(idempotency|client|testing)|migrations)/' },
      to: { path: '^src/demo/' },
    },
  ],
  options: {
    tsConfig: { fileName: 'tsconfig.json' },
    // Type-only imports count: a reader follows them as much as any other.
    tsPreCompilationDeps: true,
    doNotFollow: { path: 'node_modules' },
  },
};
// Read by test/architecture.spec.ts; dependency-cruiser takes no extra keys in its configuration.
Object.defineProperty(module.exports, 'LAYERS', { value: LAYERS });
