import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

interface Manifest {
  type?: string;
  engines?: { node?: string };
  scripts?: Record<string, string>;
}

interface Lock {
  packages: Record<string, { version?: string }>;
}

const fixturesDir = 'test/fixtures';
const readJson = <T>(path: string): T => JSON.parse(readFileSync(path, 'utf8'));

/**
 * The consumer apps of the supported rows: every folder of test/fixtures with
 * a package.json, as test/fixtures/run.mjs finds them, less the `unsupported-`
 * ones, apps the module must refuse.
 */
const fixtures = readdirSync(fixturesDir, { withFileTypes: true })
  .filter((entry) => entry.isDirectory() && !entry.name.startsWith('unsupported-') && existsSync(join(fixturesDir, entry.name, 'package.json')))
  .map((entry) => entry.name)
  .sort();

/**
 * What a fixture runs on, in the table's words: the majors its committed lock
 * installs (what `npm run test:consumers` tests), its module format, the
 * runner of its `npm test` and its Node engines.
 */
function supportRow(fixture: string): string[] {
  const manifest = readJson<Manifest>(join(fixturesDir, fixture, 'package.json'));
  const lock = readJson<Lock>(join(fixturesDir, fixture, 'package-lock.json'));
  const installed = (name: string) => {
    const version = lock.packages[`node_modules/${name}`]?.version;
    if (!version) throw new Error(`${fixture}'s package-lock.json installs no ${name}`);
    return version.split('.').map(Number);
  };
  const [nest] = installed('@nestjs/core');
  const [typeormMajor, typeormMinor] = installed('typeorm');
  const test = manifest.scripts?.test ?? '';
  const runner = /\bvitest\b/.test(test) ? 'Vitest' : /\bjest\b/.test(test) ? 'Jest' : `unknown (npm test runs ${JSON.stringify(test)})`;
  const node = manifest.engines?.node ?? 'any';
  return [
    String(nest),
    typeormMajor === 0 ? `0.${typeormMinor}` : `${typeormMajor}.x`,
    manifest.type === 'module' ? 'ESM' : 'CommonJS',
    runner,
    /^>=\s*[\d.]+$/.test(node) ? `${node.replace(/^>=\s*/, '')}+` : node,
    `[\`${fixture}\`](${fixturesDir}/${fixture}/)`,
  ];
}

/** The rows of the README's table between the support-table markers, as cells. */
function tableRows(): string[][] {
  const readme = readFileSync('README.md', 'utf8');
  const match = /<!-- support-table:start -->\n([\s\S]*?)<!-- support-table:end -->/.exec(readme);
  if (!match) throw new Error('the README has no <!-- support-table:start --> ... <!-- support-table:end --> block');
  const lines = match[1].split('\n').filter((line) => line.startsWith('|'));
  // The header and the |---| line first.
  return lines.slice(2).map((line) =>
    line
      .slice(1, -1)
      .split('|')
      .map((cell) => cell.trim()),
  );
}

/** The fixture a row names, from its last cell's link. */
const rowFixture = (row: string[]) => /\[`([^`]+)`\]/.exec(row.at(-1) ?? '')?.[1];

describe("the README's support table", () => {
  it('has a row for every consumer app, and no row without one', () => {
    expect(fixtures.length).toBeGreaterThan(0);
    expect(tableRows().map(rowFixture).sort()).toEqual(fixtures);
  });

  it.each(fixtures)("says what %s runs on, as its package.json and lock say", (fixture) => {
    expect(tableRows().find((row) => rowFixture(row) === fixture)).toEqual(supportRow(fixture));
  });
});
