// `node --import ./test/support/typeorm-0.3.hooks.mjs …`: every ES import of
// typeorm in the process loads the typeorm-0.3 devDependency instead, as the
// typeorm-0.3 project of vitest.config.ts does for its suites.
import { register } from 'node:module';

const hooks = `export async function resolve(specifier, context, next) {
  return next(specifier === 'typeorm' || specifier.startsWith('typeorm/') ? specifier.replace(/^typeorm/, 'typeorm-0.3') : specifier, context);
}`;
register(`data:text/javascript,${encodeURIComponent(hooks)}`);
