import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/** The packages a compiled entry point loads, following its static imports (lazy `import()`s excluded). */
function packagesLoadedBy(entry: string): Set<string> {
  const packages = new Set<string>();
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    const source = readFileSync(file, 'utf8');
    for (const [, specifier] of source.matchAll(/^\s*(?:import|export)\s(?:[^;'"]*?\sfrom\s)?\s*['"]([^'"]+)['"]/gm)) {
      if (specifier.startsWith('.')) visit(resolve(dirname(file), specifier));
      else packages.add(specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0]);
    }
  };
  visit(resolve('dist', entry));
  return packages;
}

const TEST_FRAMEWORKS = ['jest', '@jest/globals', 'vitest', 'supertest', '@nestjs/testing'];

// Built by `npm test` (tsc) before Vitest runs.
describe('entry points load only what they need', () => {
  it('the core loads no optional integration and no test framework', () => {
    const loaded = packagesLoadedBy('src/idempotency/index.js');
    expect(loaded).toContain('@nestjs/common');
    for (const optional of ['@opentelemetry/api', 'prom-client', '@nestjs/swagger', '@nestjs/microservices', '@nestjs/schedule', '@nats-io/transport-node', '@nats-io/jetstream', ...TEST_FRAMEWORKS]) expect(loaded).not.toContain(optional);
  });

  it('the core serves GraphQL mutations without loading a GraphQL package', () => {
    const loaded = packagesLoadedBy('src/idempotency/index.js');
    for (const graphql of ['graphql', '@nestjs/graphql', '@nestjs/apollo', '@nestjs/mercurius', '@apollo/server', 'mercurius']) expect(loaded).not.toContain(graphql);
  });

  it('the testing kit loads no test framework and no HTTP client besides fetch', () => {
    const loaded = packagesLoadedBy('src/testing/index.js');
    expect(loaded).toContain('pg');
    for (const avoided of [...TEST_FRAMEWORKS, '@opentelemetry/api', 'prom-client']) expect(loaded).not.toContain(avoided);
  });

  it('the NATS entry point loads the NATS client and @nestjs/microservices', () => {
    const loaded = packagesLoadedBy('src/idempotency/nats/index.js');
    for (const needed of ['@nats-io/transport-node', '@nats-io/jetstream', '@nestjs/microservices']) expect(loaded).toContain(needed);
  });

  it('the CLI alone loads its argument parser', () => {
    expect(packagesLoadedBy('src/idempotency/cli/main.js')).toContain('commander');
    expect(packagesLoadedBy('src/idempotency/index.js')).not.toContain('commander');
  });

  it('the tracing entry point loads @opentelemetry/api, and prom-client only the metrics one', () => {
    expect(packagesLoadedBy('src/idempotency/tracing/index.js')).toContain('@opentelemetry/api');
    expect(packagesLoadedBy('src/idempotency/metrics/index.js')).toContain('prom-client');
  });
});
