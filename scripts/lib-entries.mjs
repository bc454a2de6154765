// Completes the package's two builds after tsc (npm run build, build:lib): marks dist/lib/cjs as CommonJS,
// which the root's "type": "module" would otherwise make Node read as ES modules.
import { mkdir, writeFile } from 'node:fs/promises';

const cjs = new URL('../dist/lib/cjs/', import.meta.url);
await mkdir(cjs, { recursive: true });
await writeFile(new URL('package.json', cjs), `${JSON.stringify({ type: 'commonjs' }, null, 2)}\n`);
