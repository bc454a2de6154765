import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';

const EMBEDDED = new URL('../dist/src/demo/database/embedded-postgres.js', import.meta.url).href;

/** Runs a node process that starts and stops an embedded PostgreSQL, sets `exitCode`, and ends on its own. */
function exitCodeAfterEmbeddedRun(exitCode: number): Promise<number | null> {
  const script = `
    const { startEmbeddedPostgres, sharedTempDir } = await import(${JSON.stringify(EMBEDDED)});
    const database = await startEmbeddedPostgres({ dataDir: sharedTempDir('exit-code', ${JSON.stringify(randomUUID())}) });
    await database.stop();
    process.exitCode = ${exitCode};
  `;
  return new Promise((resolve) => {
    const child = execFile(process.execPath, ['--input-type=module', '-e', script], { cwd: fileURLToPath(new URL('..', import.meta.url)) });
    child.on('exit', (code) => resolve(code));
  });
}

/**
 * A process that used the embedded PostgreSQL (the test run's global setup,
 * the demo, the bench, the chaos run) keeps the exit code it ends with:
 * embedded-postgres's exit hook calls process.exit(0) when the event loop
 * empties, which made a failed test run on it exit 0, and CI pass it.
 */
describe('a process that ran an embedded PostgreSQL', () => {
  it('exits with the code it set, not 0', async () => {
    expect(await exitCodeAfterEmbeddedRun(3)).toBe(3);
  }, 60_000);

  it('exits 0 when it set none', async () => {
    expect(await exitCodeAfterEmbeddedRun(0)).toBe(0);
  }, 60_000);
});
