import { defineConfig } from 'vitest/config';

/**
 * The shape Nest 12's ts-esm app template sets up: Vitest with globals, so
 * specs use describe/it/expect/vi without imports. Vite's transformer (Oxc)
 * emits the decorator metadata Nest injects by, from tsconfig's
 * `emitDecoratorMetadata`.
 */
export default defineConfig({
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
