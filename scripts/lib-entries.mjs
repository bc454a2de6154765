// Completes the package's two builds after tsc (npm run build, build:lib): marks dist/lib/cjs as CommonJS, which
// the root's "type": "module" would otherwise make Node read as ES modules, and writes the entry points that the
// `exports` map names.
//
// One build per process. An app can load both builds: its ES modules import the package while a CommonJS
// dependency or test helper requires it. Two copies of the library would mean two IdempotencyModule and
// IdempotencyTransactionHost classes (injection tokens that do not match), two sets of Symbol tokens, AsyncLocalStorage
// instances and WeakMaps, and a transaction opened by one copy that the other cannot see. So each entry point
// hands out the build that was loaded first in the process, which it records under a global Symbol.for() key;
// the other build's entry points hand out that one's modules (require() of ES modules, which Node 20.19+ has,
// or createRequire() of the CommonJS ones).
//
// An entry point of the `exports` map is { import: { types, default }, require: { types, default } }: `default`
// is the entry point written here, and `types`, the declarations of the compiled module it hands out.
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = new URL('../', import.meta.url);
const BUILD = "Symbol.for('nest-idempotency:build')";
const HEADER = '// Written by scripts/lib-entries.mjs: hands out the build of nest-idempotency loaded first in the process.';

const cjs = new URL('dist/lib/cjs/', root);
await mkdir(cjs, { recursive: true });
await writeFile(new URL('package.json', cjs), `${JSON.stringify({ type: 'commonjs' }, null, 2)}\n`);

const require = createRequire(import.meta.url);
// Loading the compiled modules to list their exports runs Nest's decorators, which need the metadata API.
require('reflect-metadata');
const manifest = JSON.parse(await readFile(new URL('package.json', root), 'utf8'));
for (const [subpath, conditions] of Object.entries(manifest.exports)) {
  if (typeof conditions === 'string') continue;
  const esm = { entry: pathOf(conditions.import.default), module: moduleOf(conditions.import.types) };
  const commonjs = { entry: pathOf(conditions.require.default), module: moduleOf(conditions.require.types) };
  const names = Object.keys(await import(pathToFileURL(esm.module).href)); // sorted, as a module namespace is
  const cjsNames = Object.keys(require(commonjs.module)).sort();
  if (names.join() !== cjsNames.join()) throw new Error(`${subpath}: the builds export different names:\n  esm ${names}\n  cjs ${cjsNames}`);
  await write(esm.entry, esmEntry(names, specifier(esm.entry, esm.module), specifier(esm.entry, commonjs.module)));
  await write(commonjs.entry, cjsEntry(specifier(commonjs.entry, commonjs.module), specifier(commonjs.entry, esm.module)));
}

/** Its own build's module, statically imported (ES modules cannot import on a condition without top-level await, which require() refuses). */
function esmEntry(names, own, other) {
  return `${HEADER}
import { createRequire } from 'node:module';
import * as own from '${own}';

const first = (globalThis[${BUILD}] ??= 'esm');
const build = first === 'esm' ? own : createRequire(import.meta.url)('${other}');
export const { ${names.join(', ')} } = build;
`;
}

function cjsEntry(own, other) {
  return `'use strict';
${HEADER}
const first = (globalThis[${BUILD}] ??= 'cjs');
module.exports = first === 'cjs' ? require('${own}') : require('${other}');
`;
}

function pathOf(packagePath) {
  return fileURLToPath(new URL(packagePath, root));
}

function moduleOf(types) {
  return pathOf(types.replace(/\.d\.ts$/, '.js'));
}

function specifier(from, to) {
  const path = relative(dirname(from), to);
  return path.startsWith('.') ? path : `./${path}`;
}

async function write(path, text) {
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, text);
}
