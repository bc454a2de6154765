import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

/**
 * The suites about the transaction join and the TypeORM internals the module
 * relies on, which run a second time on TypeORM 0.3 (the `typeorm-0.3`
 * devDependency, npm's alias of the latest 0.3). test/faithful-transaction/
 * tests the join through the package's ES build.
 */
const TYPEORM_JOIN_SUITES = [
  'src/idempotency/transactions/transaction-join.spec.ts',
  'src/idempotency/driver/pg-client.contract.spec.ts',
  'src/idempotency/transactions/libraries/*.contract.spec.ts',
  'test/write-paths.e2e-spec.ts',
  'test/user-code.e2e-spec.ts',
  'test/unit-savepoints.e2e-spec.ts',
  'test/named-data-source.e2e-spec.ts',
  'test/compatibility.e2e-spec.ts',
  'test/faithful-transaction/*.e2e-spec.ts',
];

/**
 * The suites about the systems beside PostgreSQL (NATS, Redis, a browser,
 * HAProxy, the embedded server itself), for which PostgreSQL only stores.
 * CI runs them once, on the embedded server; its second run, on the
 * machine's PostgreSQL, leaves them out with OTHER_SYSTEMS=skip.
 */
const OTHER_SYSTEMS_SUITES = ['delivery', 'nats-cluster', 'nats-late-start', 'rate-limit-outage', 'admin-page', 'database-endpoint', 'embedded-postgres-exit'].map(
  (name) => `test/${name}.e2e-spec.ts`,
);

/**
 * The shape Nest 12's ts-esm app template sets up: Vitest with globals, so
 * specs use describe/it/expect/vi without imports. Vite's transformer (Oxc)
 * emits the decorator metadata Nest injects by, from tsconfig's
 * `emitDecoratorMetadata`.
 */
export default defineConfig({
  // graphql ships CommonJS (main) and ESM (module) copies; Node and the CommonJS
  // @nestjs/graphql load the former, Vite would pick the latter, and two copies
  // refuse each other's types ("from another module or realm").
  resolve: { alias: [{ find: /^graphql$/, replacement: 'graphql/index.js' }] },
  test: {
    globals: true,
    // The consumer apps are tested against the packed tarball by `npm run test:consumers`.
    exclude: ['**/node_modules/**', 'test/fixtures/**', ...(process.env.OTHER_SYSTEMS === 'skip' ? OTHER_SYSTEMS_SUITES : [])],
    globalSetup: ['test/support/global-setup.ts'],
    // The package's builds load natively, as an installed package's do, not through Vite's module runner, whose
    // copy of a module is not the one Node's require() of it returns (test/dual-build.e2e-spec.ts loads both).
    server: { deps: { external: [/\/dist\/lib\//] } },
    // Vitest's default is one worker per core but one, a single one on two
    // cores; the suites mostly wait (on PostgreSQL, child processes, timers),
    // and each has a database of its own, so three at once on two cores take
    // about 40% of the time one takes.
    maxWorkers: Math.max(3, availableParallelism() - 1),
    testTimeout: 30_000,
    hookTimeout: 30_000,
    projects: [
      // Each project names its own suites: a project's `include` would add to a shared one, not replace it.
      { extends: true, test: { name: 'typeorm-1', include: ['src/**/*.spec.ts', 'test/**/*.spec.ts', 'test/**/*.e2e-spec.ts'] } },
      {
        extends: true,
        // Every `import 'typeorm'` Vite resolves: the sources', the tests', and @nestjs/typeorm's, which is inlined for
        // it (an external package would import TypeORM 1 natively). test/support/typeorm-0.3.setup.ts checks both.
        resolve: { alias: [{ find: /^typeorm$/, replacement: 'typeorm-0.3' }] },
        test: {
          name: 'typeorm-0.3',
          include: TYPEORM_JOIN_SUITES,
          setupFiles: ['test/support/typeorm-0.3.setup.ts'],
          // The package's ES build too, which only the suites that test the build load (test/faithful-transaction/):
          // loaded natively it would import TypeORM 1, and the app's DataSource would be a class it does not know.
          // Inline wins over the shared `external` above; test/support/faithful-app.ts checks that the build and
          // the suite share one TypeORM.
          server: { deps: { inline: ['@nestjs/typeorm', /\/dist\/lib\/esm\//] } },
        },
      },
    ],
  },
});
