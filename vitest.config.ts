import { defineConfig } from 'vitest/config';

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
    include: ['src/**/*.spec.ts', 'test/**/*.spec.ts', 'test/**/*.e2e-spec.ts'],
    // The consumer apps are tested against the packed tarball by `npm run test:consumers`.
    exclude: ['**/node_modules/**', 'test/fixtures/**'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
