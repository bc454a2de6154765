import { readFileSync } from 'node:fs';
import pg from 'pg';
import { createScratchDatabase } from '../src/testing/index.js';

const cjsFixture = (path: string) => readFileSync(`test/fixtures/nest12-cjs-jest/${path}`, 'utf8');

/** A document's text under a heading, up to the next heading of the same level or above outside a code block. */
function section(file: string, heading: string): string {
  const lines = readFileSync(file, 'utf8').split('\n');
  const start = lines.indexOf(heading);
  if (start < 0) throw new Error(`${file} has no heading ${heading}`);
  let fenced = false;
  for (let at = start + 1; at < lines.length; at++) {
    if (lines[at].trimStart().startsWith('```')) fenced = !fenced;
    else if (!fenced && /^#+ /.test(lines[at]) && lines[at].indexOf(' ') <= heading.indexOf(' ')) return lines.slice(start, at).join('\n');
  }
  return lines.slice(start).join('\n');
}

/** The code blocks of a language in a text, without their fences and with the indentation of a list item taken off. */
function codeBlocks(text: string, language: string): string[] {
  return [...text.matchAll(new RegExp(`^( *)\`\`\`${language}\\n([\\s\\S]*?)^\\1\`\`\`$`, 'gm'))].map(([, indent, body]) =>
    body.replace(new RegExp(`^${indent}`, 'gm'), ''),
  );
}

// nest12-cjs-jest is an app of the Nest 12 CommonJS template's shape; `npm run test:consumers` runs it on the packed package.
describe('the README and the guides, held to what runs', () => {
  it('names every table the migrations create where it tells how to install them', async () => {
    const db = await createScratchDatabase(process.env.DATABASE_URL!, { prefix: 'readme' });
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const { rows } = await client.query(`SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'migrations' ORDER BY tablename`);
      const tables = rows.map(({ tablename }) => tablename as string);
      expect(tables).toContain('idempotency_records');
      for (const [file, heading] of [
        ['README.md', '## Install'],
        ['docs/getting-started.md', '## The module and its migrations'],
      ]) {
        const install = section(file, heading);
        expect(tables.filter((table) => !install.includes(`\`${table}\``)), file).toEqual([]);
      }
    } finally {
      await client.end();
      await db.drop();
    }
  });

  it('gives the Jest recipe for both configs of the Nest 12 CommonJS template, as nest12-cjs-jest applies it', () => {
    const moduleFormat = section('docs/getting-started.md', '## Module format: ESM, and CommonJS apps');
    const [unitRecipe] = codeBlocks(moduleFormat, 'ts');
    const unitConfig = cjsFixture('jest.config.ts').replace(/\s+/g, ' ');
    for (const line of unitRecipe.split('\n').filter((line) => line.trim() !== '')) expect(unitConfig).toContain(line.trim());
    expect(moduleFormat).toContain('test/jest-e2e.json');
    const [e2eRecipe] = codeBlocks(moduleFormat, 'json');
    expect(e2eRecipe, 'a test/jest-e2e.json block').toBeDefined();
    expect(JSON.parse(cjsFixture('test/jest-e2e.json'))).toMatchObject(JSON.parse(e2eRecipe));
  });

  it('tests a route with the testing kit in code that nest12-cjs-jest runs as it is', () => {
    const [example] = codeBlocks(section('docs/testing.md', '# Testing your routes'), 'ts');
    expect(cjsFixture('test/transfers.kit.e2e-spec.ts')).toContain(example);
  });
});
