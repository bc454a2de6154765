import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import ts from 'typescript';

interface Layer {
  name: string;
  folders: string[];
  files?: string[];
}

// The layers `npm run lint:deps` enforces, as the rule file lists them.
const { LAYERS } = createRequire(import.meta.url)('../.dependency-cruiser.cjs') as { LAYERS: Layer[] };
const root = 'src/idempotency';
const map = readFileSync('docs/architecture.md', 'utf8');

/** The map's table of folders, as `layer folder` lines in its order: `cli/` stands for a folder, `index.ts` for a file. */
function mapRows(): string[] {
  return [...map.matchAll(/^\| ([a-z]+) \| `([^`]+)` \|/gm)].map(([, layer, place]) => `${layer} ${place}`);
}

describe('the code’s map (docs/architecture.md)', () => {
  it('lists the layers of the rule file, folder by folder, in their order', () => {
    const rules = LAYERS.flatMap((layer) => [...(layer.files ?? []), ...layer.folders.map((folder) => `${folder}/`)].map((place) => `${layer.name} ${place}`));
    expect(mapRows()).toEqual(rules);
  });

  it('draws each layer with its folders, top to bottom', () => {
    const drawn = [...map.matchAll(/^\s+(\w+)\["<b>(\w+)<\/b><br\/>([^"]+)"\]$/gm)].map(([, , name, places]) => `${name}: ${places}`);
    expect(drawn).toEqual(LAYERS.map((layer) => `${layer.name}: ${[...(layer.files ?? []), ...layer.folders.map((folder) => `${folder}/`)].join(' · ')}`));
  });

  it('covers every folder of src/idempotency, and the root holds only index.ts and its spec besides them', () => {
    const entries = readdirSync(root, { withFileTypes: true });
    const folders = entries.filter((entry) => entry.isDirectory()).map((entry) => entry.name);
    expect(folders.sort()).toEqual(LAYERS.flatMap((layer) => layer.folders).sort());
    expect(entries.filter((entry) => entry.isFile()).map((entry) => entry.name).sort()).toEqual(['index.ts', 'public-api.spec.ts']);
  });

  it('keeps the dispatcher every request reads through within 160 lines', () => {
    const lines = readFileSync(`${root}/http/idempotency.interceptor.ts`, 'utf8').trimEnd().split('\n').length;
    expect(lines).toBeLessThanOrEqual(160);
  });
});

/** The package's source files, specs left out. */
function sourceFiles(folder: string): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.spec.ts') ? [path] : [];
  });
}

/**
 * The functions of `file` that take more than `most` positional parameters,
 * but those Nest calls with the providers it injects (constructors, and the
 * functions a provider names as its `useFactory`), as `file:line name`.
 */
function longParameterLists(file: string, most: number): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const factories = new Set<string>();
  const found: Array<{ node: ts.SignatureDeclaration; name: string }> = [];
  const visit = (node: ts.Node): void => {
    if (ts.isPropertyAssignment(node) && node.name.getText() === 'useFactory' && ts.isIdentifier(node.initializer)) factories.add(node.initializer.text);
    if (ts.isFunctionLike(node) && !ts.isFunctionTypeNode(node) && !ts.isConstructorDeclaration(node) && node.parameters.length > most) {
      found.push({ node, name: node.name?.getText() ?? '(anonymous)' });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found
    .filter(({ name }) => !factories.has(name))
    .map(({ node, name }) => `${file}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1} ${name}`);
}

describe('the code’s shape', () => {
  it('gives no function more than 5 positional parameters: what steps share travels in one object', () => {
    expect(sourceFiles(root).flatMap((file) => longParameterLists(file, 5))).toEqual([]);
  });

  it('casts through unknown into another library only in the seams the map lists, each pinned by a test that exists', () => {
    const section = map.slice(map.indexOf('## The seams'), map.indexOf('## ', map.indexOf('## The seams') + 3));
    const rows = [...section.matchAll(/^\| [^|]+ \| `([^`]+)` \| [^|]+ \| (.+) \|$/gm)].map(([, seam, pinned]) => ({ seam, pinned: [...pinned.matchAll(/`([^`]+)`/g)].map(([, path]) => path) }));
    expect(rows.length).toBeGreaterThan(0);
    for (const { seam, pinned } of rows) {
      expect(existsSync(join(root, seam)), seam).toBe(true);
      for (const path of pinned) expect(existsSync(path), path).toBe(true);
    }
    const inSeam = (file: string) => rows.some(({ seam }) => (seam.endsWith('/') ? file.startsWith(join(root, seam)) : file === join(root, seam)));
    const outside = sourceFiles(root).filter((file) => !inSeam(file) && readFileSync(file, 'utf8').includes('as unknown as'));
    expect(outside).toEqual([]);
  });
});
