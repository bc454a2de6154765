import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { IdempotencyFacade } from './http/idempotency.facade.js';
import { IdempotencyExtensions } from './http/idempotency-extensions.js';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from './options/idempotency.tokens.js';
import { IdempotencyTables } from './records/idempotency-tables.js';
import { OutcomeCodec } from './records/outcome-codec.js';
import { IdempotencyDataSource } from './transactions/idempotency-data-source.js';
import * as publicApi from './index.js';
import * as adminApi from './admin/index.js';
import * as outboxApi from './outbox/index.js';
import * as phasesApi from './phases/index.js';

const LIBRARY = join(process.cwd(), 'src/idempotency');

/** The exports of the Nest packages the project depends on: their decorators are the framework's, not the library's. */
async function nestExports(): Promise<Array<Record<string, unknown>>> {
  const manifest = JSON.parse(readFileSync(join(process.cwd(), 'package.json'), 'utf8'));
  const names = Object.keys({ ...manifest.peerDependencies, ...manifest.devDependencies }).filter((name) => name.startsWith('@nestjs/') && name !== '@nestjs/cli');
  const loaded = await Promise.allSettled(names.map((name) => import(name) as Promise<Record<string, unknown>>));
  return loaded.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
}

/** The library's source files, specs left out. */
function sourceFiles(folder: string): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.spec.ts') ? [path] : [];
  });
}

/** `@Name(` as doc comments write a decorator. */
function decoratorsNamedInDocs(source: string): string[] {
  const docs = source.match(/\/\*\*[\s\S]*?\*\//g) ?? [];
  return docs.flatMap((doc) => [...doc.matchAll(/@([A-Z]\w*)\(/g)].map((match) => match[1]));
}

describe('the public API', () => {
  it('exports every decorator its doc comments tell users to write', async () => {
    const framework = await nestExports();
    const missing = sourceFiles(LIBRARY).flatMap((file) =>
      decoratorsNamedInDocs(readFileSync(file, 'utf8'))
        .filter((name) => ![publicApi, outboxApi, adminApi, phasesApi, ...framework].some((exports) => name in exports))
        .map((name) => `@${name}() in ${file.slice(LIBRARY.length + 1)}`),
    );
    expect(missing).toEqual([]);
  });

  it('names the phased concepts once each: the operation, the claim it runs under, and its phases', () => {
    const phased = Object.keys(phasesApi).filter((name) => /phase/i.test(name));
    expect(phased.sort()).toEqual(['IdempotencyPhasesModule', 'PhasedClaim', 'PhasedOperation']);
  });

  it('lets apps inject only what they can name: every provider IdempotencyModule exports is in the public API, but the facade its interceptors use, and what the package’s other modules name, register with and build on', () => {
    const exported: unknown[] = Reflect.getMetadata('exports', publicApi.IdempotencyModule);
    const named: unknown[] = [...Object.values(publicApi), RESOLVED_IDEMPOTENCY_OPTIONS /* through InjectIdempotencyOptions() */];
    const internal: unknown[] = [IdempotencyFacade, IdempotencyTables, IdempotencyExtensions, IdempotencyDataSource, OutcomeCodec];
    expect(exported.filter((provider) => !internal.includes(provider) && !named.includes(provider))).toEqual([]);
  });
});
