import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

interface Manifest {
  name: string;
  engines?: { node?: string };
  dependencies?: Record<string, string>;
}

const readManifest = (dir: string): Manifest => JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));

/** Where Node finds an installed package from `dir`: in the nearest node_modules up the tree. */
function installedDir(name: string, dir: string): string {
  for (let at = dir; ; at = dirname(at)) {
    const candidate = join(at, 'node_modules', name);
    if (existsSync(join(candidate, 'package.json'))) return candidate;
    if (dirname(at) === at) throw new Error(`${name} is not installed (looked up from ${dir})`);
  }
}

/** The packages installing this one installs: its dependencies and theirs, not its peers. */
function runtimeDependencies(): Manifest[] {
  const found = new Map<string, Manifest>();
  const visit = (dir: string) => {
    for (const name of Object.keys(readManifest(dir).dependencies ?? {})) {
      const installed = installedDir(name, dir);
      if (found.has(installed)) continue;
      found.set(installed, readManifest(installed));
      visit(installed);
    }
  };
  visit(process.cwd());
  return [...found.values()];
}

type Version = [number, number, number];

const parse = (text: string): Version => {
  const [major, minor = 0, patch = 0] = text.split('.').map(Number);
  return [major, minor, patch];
};
const compare = (a: Version, b: Version) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2];

/**
 * Whether `version` meets an `engines` range as npm reads it: alternatives
 * joined by `||`, each of comparators `>=`, `>`, `<` or `^` joined by spaces.
 * A range written otherwise fails the test, to be read by hand.
 */
function satisfies(version: string, range: string): boolean {
  const current = parse(version);
  return range.split('||').some((alternative) =>
    alternative.trim().split(/\s+/).every((comparator) => {
      if (comparator === '*' || comparator === '') return true;
      const match = /^(>=|>|<|\^)\s*v?(\d+(?:\.\d+){0,2})$/.exec(comparator);
      if (!match) throw new Error(`engines range ${JSON.stringify(range)} is written in a way this test does not read: check it by hand`);
      const bound = parse(match[2]);
      const order = compare(current, bound);
      if (match[1] === '>=') return order >= 0;
      if (match[1] === '>') return order > 0;
      if (match[1] === '<') return order < 0;
      return order >= 0 && current[0] === bound[0];
    }),
  );
}

/** The oldest Node of each line the package promises, from its own `engines` (`^20.19.0 || >=22.12.0`), and the LTS line after them. */
const supported = [...(readManifest(process.cwd()).engines?.node ?? '').split('||').map((alternative) => /(\d+\.\d+\.\d+)/.exec(alternative)?.[1] ?? 'none'), '24.0.0'];

describe('engines', () => {
  it('name the oldest Node the package supports on each line: 20.19, and 22.12 (require() of ES modules without a flag)', () => {
    expect(supported.slice(0, -1)).toEqual(['20.19.0', '22.12.0']);
  });

  // npm warns EBADENGINE, for this package, on every install where one does not.
  it.each(supported)('of every runtime dependency accept Node %s', (node) => {
    const refusing = runtimeDependencies().filter(({ engines }) => engines?.node !== undefined && !satisfies(node, engines.node));
    expect(refusing.map(({ name, engines }) => `${name} (node ${engines?.node})`)).toEqual([]);
  });
});
