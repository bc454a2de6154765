import { readFileSync } from 'node:fs';
import pg from 'pg';
import { createScratchDatabase } from '../src/testing/index.js';

const readme = readFileSync('README.md', 'utf8');

/** The README's text under a heading, up to the next heading of the same level or above outside a code block. */
function section(heading: string): string {
  const lines = readme.split('\n');
  const start = lines.indexOf(heading);
  if (start < 0) throw new Error(`the README has no heading ${heading}`);
  let fenced = false;
  for (let at = start + 1; at < lines.length; at++) {
    if (lines[at].trimStart().startsWith('```')) fenced = !fenced;
    else if (!fenced && /^#+ /.test(lines[at]) && lines[at].indexOf(' ') <= heading.indexOf(' ')) return lines.slice(start, at).join('\n');
  }
  return lines.slice(start).join('\n');
}

describe('the README, held to what runs', () => {
  it('names every table the migrations create where it tells how to install them', async () => {
    const db = await createScratchDatabase(process.env.DATABASE_URL!, { prefix: 'readme' });
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const { rows } = await client.query(`SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'migrations' ORDER BY tablename`);
      const tables = rows.map(({ tablename }) => tablename as string);
      expect(tables).toContain('idempotency_records');
      const install = section('## Install');
      expect(tables.filter((table) => !install.includes(`\`${table}\``))).toEqual([]);
    } finally {
      await client.end();
      await db.drop();
    }
  });
});
