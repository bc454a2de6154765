import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { satisfies } from '../src/idempotency/module/installed-versions.js';

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
    nodeCell(node),
    `[\`${fixture}\`](${fixturesDir}/${fixture}/)`,
  ];
}

/** A fixture's Node engines in the table's words: the majors of caret ranges (`^22.12.0 || ^24.0.0` is `22, 24`), which CI runs it on. */
function nodeCell(engines: string): string {
  const majors = [...engines.matchAll(/\^(\d+)\./g)].map(([, major]) => major);
  return majors.length > 0 && majors.length === engines.split('||').length ? majors.join(', ') : engines;
}

/** The rows of a document's table between the support-table markers, as cells by column. */
function tableRows(file = 'README.md'): Array<Record<string, string>> {
  const text = readFileSync(file, 'utf8');
  const match = /<!-- support-table:start -->\n([\s\S]*?)<!-- support-table:end -->/.exec(text);
  if (!match) throw new Error(`${file} has no <!-- support-table:start --> ... <!-- support-table:end --> block`);
  const cellsOf = (line: string) =>
    line
      .slice(1, -1)
      .split('|')
      .map((cell) => cell.trim());
  const [header, , ...rows] = match[1].split('\n').filter((line) => line.startsWith('|'));
  const columns = cellsOf(header);
  return rows.map((line) => Object.fromEntries(cellsOf(line).map((cell, index) => [columns[index], cell])));
}

/** The fixture a row names, from its last cell, a link in the README and a name in the guides. */
const rowFixture = (row: Record<string, string>) => /`([^`]+)`/.exec(row['Tested by'] ?? '')?.[1];

/** The row's cells that say what it runs on, in the order supportRow() gives them. */
const runsOn = (row: Record<string, string>) => [row.Nest, row.TypeORM, row['Module format'], row['Test runner'], row.Node, row['Tested by']];

/** `npm install nest-idempotency @nestjs/typeorm@11 typeorm@^0.3 pg` as [name, range or undefined] per package. */
function packagesOf(line: string): Array<[string, string | undefined]> {
  return line
    .replace(/^`|`$/g, '')
    .split(/\s+/)
    .slice(2)
    .map((spec) => {
      const at = spec.indexOf('@', 1);
      return at < 0 ? [spec, undefined] : [spec.slice(0, at), spec.slice(at + 1)];
    });
}

/** `11` and `^0.3` as the caret ranges satisfies() reads: `^11.0.0`, `^0.3.0`. */
const caret = (range: string) => {
  const parts = range.replace(/^\^/, '').split('.');
  return `^${[...parts, '0', '0'].slice(0, 3).join('.')}`;
};

describe("the README's support table", () => {
  it('has a row for every consumer app, and no row without one', () => {
    expect(fixtures.length).toBeGreaterThan(0);
    expect(tableRows().map(rowFixture).sort()).toEqual(fixtures);
  });

  it.each(fixtures)('says what %s runs on, as its package.json and lock say', (fixture) => {
    expect(runsOn(tableRows().find((row) => rowFixture(row) === fixture)!)).toEqual(supportRow(fixture));
  });

  // test/fixtures/run.mjs runs the line of a fixture that leaves out the packages it names, and checks the majors it installed.
  it.each(fixtures)("gives %s an install line whose versions its lock holds", (fixture) => {
    const row = tableRows().find((candidate) => rowFixture(candidate) === fixture)!;
    const lock = readJson<Lock>(join(fixturesDir, fixture, 'package-lock.json'));
    const packages = packagesOf(row.Install);
    expect(packages.map(([name]) => name)).toEqual(expect.arrayContaining(['nest-idempotency', '@nestjs/typeorm', 'typeorm', 'pg']));
    for (const [name, range] of packages) {
      const version = lock.packages[`node_modules/${name}`]?.version;
      expect({ name, version }).toEqual({ name, version: expect.any(String) });
      if (range) expect({ name, range, satisfied: satisfies(version!, caret(range)) }).toEqual({ name, range, satisfied: true });
    }
  });

  it("is the one the Install section gives, line for line", () => {
    const readme = readFileSync('README.md', 'utf8');
    const install = readme.slice(readme.indexOf('## Install'), readme.indexOf('**One import and the migration.**'));
    const block = /```bash\n([\s\S]*?)```/.exec(install)?.[1] ?? '';
    const lines = block
      .split('\n')
      .map((line) => line.replace(/#.*$/, '').trim())
      .filter(Boolean);
    expect(new Set(lines)).toEqual(new Set(tableRows().map((row) => row.Install.replace(/^`|`$/g, ''))));
  });

  it.each([
    ['Getting started', 'docs/getting-started.md', '## The entity'],
    ['the docs home page', 'docs/index.md', 'Then one module and one decorator:'],
  ])('gives %s its install lines, one tab per row', (_, file, end) => {
    const guide = readFileSync(file, 'utf8');
    const install = guide.slice(guide.indexOf('## Install'), guide.indexOf(end));
    const lines = [...install.matchAll(/```bash \[[^\]]+\]\n([^\n]+)\n```/g)].map(([, line]) => line.trim());
    expect(new Set(lines)).toEqual(new Set(tableRows().map((row) => row.Install.replace(/^`|`$/g, ''))));
  });

  it('is the one docs/upgrading.md gives', () => {
    const inGuide = tableRows('docs/upgrading.md');
    expect(inGuide.map((row) => ({ ...row, 'Tested by': rowFixture(row) }))).toEqual(tableRows().map((row) => ({ ...row, 'Tested by': rowFixture(row) })));
  });
});
