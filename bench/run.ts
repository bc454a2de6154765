/**
 * `npm run bench`: builds nothing itself (the script runs tsc first), then
 * measures the idempotency layer against the bare business transaction. See
 * bench/README.md for the flags and the scenarios.
 */
import { parseBenchOptions, USAGE } from './cli-options.js';
import { runBenchSession } from './bench-session.js';
import { CleanupStack } from './cleanup-stack.js';

const log = (line: string) => console.log(`[bench] ${line}`);

async function main(): Promise<number> {
  let options: ReturnType<typeof parseBenchOptions>;
  try {
    options = parseBenchOptions(process.argv.slice(2));
  } catch (error) {
    console.error(`${error instanceof Error ? error.message : String(error)}\n\n${USAGE}`);
    return 2;
  }
  if (options === 'help') {
    console.log(USAGE);
    return 0;
  }
  const cleanup = new CleanupStack(log);
  let interrupted = false;
  const interrupt = (signal: NodeJS.Signals) => {
    if (interrupted) return;
    interrupted = true;
    log(`${signal}: stopping the load generator, the bench app and the database`);
    void cleanup.run().finally(() => process.exit(130));
  };
  process.on('SIGINT', interrupt);
  process.on('SIGTERM', interrupt);
  try {
    return await runBenchSession(options, cleanup, log);
  } catch (error) {
    if (!interrupted) console.error('[bench] failed:', error);
    return 1;
  } finally {
    await cleanup.run();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error('[bench] failed:', error);
    process.exit(1);
  },
);
