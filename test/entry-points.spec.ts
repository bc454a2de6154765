import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

/**
 * The statements of a compiled file that load another module when the file
 * loads: static imports and re-exports in the ES modules, top-level
 * `require()`s in the CommonJS copy (TypeScript writes an optional peer's
 * lazy `import()` there as a `require()` inside a promise, never at the start
 * of a line).
 */
const LOADS = {
  esm: /^\s*(?:import|export)\s(?:[^;'"]*?\sfrom\s)?\s*['"]([^'"]+)['"]/gm,
  cjs: /^(?:(?:const|var|let) \w+ = )?(?:__importDefault\(|__importStar\(|__exportStar\()?require\(["']([^"']+)["']\)/gm,
};

type Format = keyof typeof LOADS;

/** The files and packages an entry point of one build loads, following what its files load when they load (lazy loads excluded). */
function loadedFrom(format: Format, entry: string): { files: Set<string>; packages: Set<string> } {
  const packages = new Set<string>();
  const files = new Set<string>();
  const visit = (file: string) => {
    if (files.has(file)) return;
    files.add(file);
    const source = readFileSync(file, 'utf8');
    for (const [, specifier] of source.matchAll(LOADS[format])) {
      if (specifier.startsWith('.')) visit(resolve(dirname(file), specifier));
      else if (!specifier.startsWith('node:')) packages.add(specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0]);
    }
  };
  visit(resolve('dist/lib', format, entry));
  return { files, packages };
}

const TEST_FRAMEWORKS = ['jest', '@jest/globals', 'vitest', 'supertest', '@nestjs/testing'];

// Both builds of the package, built by `npm test` (npm run build) before Vitest runs.
describe.each(['esm', 'cjs'] as const)('entry points of the %s build load only what they need', (format) => {
  const loadedBy = (entry: string) => loadedFrom(format, entry).packages;

  it('the core loads no optional integration and no test framework', () => {
    const loaded = loadedBy('src/idempotency/index.js');
    expect(loaded).toContain('@nestjs/common');
    const optionals = ['@opentelemetry/api', 'prom-client', '@nestjs/swagger', '@nestjs/microservices', '@nestjs/schedule', '@nats-io/transport-node', '@nats-io/jetstream'];
    for (const optional of [...optionals, 'typeorm-transactional', '@nestjs-cls/transactional', ...TEST_FRAMEWORKS]) expect(loaded).not.toContain(optional);
  });

  it('the core loads no file of the outbox, the admin, message handlers, GraphQL or phased operations, which have entry points of their own', () => {
    const library = resolve('dist/lib', format, 'src/idempotency');
    const folders = [...loadedFrom(format, 'src/idempotency/index.js').files].map((file) => relative(library, file).split(sep)[0]);
    for (const feature of ['outbox', 'admin', 'messaging', 'graphql', 'phases', 'cli', 'metrics', 'tracing', 'nats']) expect(folders).not.toContain(feature);
    for (const feature of ['outbox', 'admin', 'messaging', 'graphql', 'phases']) expect(loadedFrom(format, `src/idempotency/${feature}/index.js`).files.size).toBeGreaterThan(1);
  });

  it('the core loads at most 80 of the package\'s files: the entry that hands out the build, and what the build\'s index loads', () => {
    const library = resolve('dist/lib', format, 'src/idempotency');
    const loaded = [...loadedFrom(format, 'src/idempotency/index.js').files].map((file) => relative(library, file)).sort();
    expect(1 + loaded.length, `the core loads:\n${loaded.join('\n')}`).toBeLessThanOrEqual(80);
  });

  it('the GraphQL entry point serves mutations without loading a GraphQL package', () => {
    const loaded = loadedBy('src/idempotency/graphql/index.js');
    for (const graphql of ['graphql', '@nestjs/graphql', '@nestjs/apollo', '@nestjs/mercurius', '@apollo/server', 'mercurius']) expect(loaded).not.toContain(graphql);
  });

  it('the testing kit loads no test framework and no HTTP client besides fetch', () => {
    const loaded = loadedBy('src/testing/index.js');
    expect(loaded).toContain('pg');
    for (const avoided of [...TEST_FRAMEWORKS, '@opentelemetry/api', 'prom-client']) expect(loaded).not.toContain(avoided);
  });

  it('the NATS entry point loads the NATS client and @nestjs/microservices', () => {
    const loaded = loadedBy('src/idempotency/nats/index.js');
    for (const needed of ['@nats-io/transport-node', '@nats-io/jetstream', '@nestjs/microservices']) expect(loaded).toContain(needed);
  });

  it('the CLI alone loads its argument parser', () => {
    expect(loadedBy('src/idempotency/cli/main.js')).toContain('commander');
    expect(loadedBy('src/idempotency/index.js')).not.toContain('commander');
  });

  it('the tracing entry point loads @opentelemetry/api, and prom-client only the metrics one', () => {
    expect(loadedBy('src/idempotency/tracing/index.js')).toContain('@opentelemetry/api');
    expect(loadedBy('src/idempotency/metrics/index.js')).toContain('prom-client');
  });
});

describe('the CommonJS build', () => {
  /** Every compiled file of a build folder. */
  const filesOf = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
      const path = join(dir, entry.name);
      return entry.isDirectory() ? filesOf(path) : entry.name.endsWith('.js') ? [path] : [];
    });

  /** A compiled file's code, without the comments TypeScript keeps. */
  const codeOf = (file: string) => readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');

  // Jest's CommonJS runtime (a CommonJS app's tests, without --experimental-vm-modules) throws at both.
  it('has no import() and no import.meta', () => {
    const esmOnly = filesOf(resolve('dist/lib/cjs')).filter((file) => /\bimport\s*\(|\bimport\.meta\b/.test(codeOf(file)));
    expect(esmOnly).toEqual([]);
  });

  it('is marked as CommonJS for Node, inside the root package’s "type": "module"', () => {
    expect(JSON.parse(readFileSync(resolve('dist/lib/cjs/package.json'), 'utf8'))).toEqual({ type: 'commonjs' });
  });
});
