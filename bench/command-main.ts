import { CleanupStack } from './cleanup-stack.js';

/** One bench command: how it reads its flags and what it runs. */
export interface BenchCommand<Options> {
  /** Prefixes every line it logs, e.g. `bench` gives `[bench] …`. */
  tag: string;
  /** Printed by `--help` and after a bad flag. */
  usage: string;
  /** Parses the command line; throws with a message naming the bad flag. */
  parse(argv: string[]): Options | 'help';
  /** The run itself; resolves to the exit code. Everything it starts goes on `cleanup`. */
  session(options: Options, cleanup: CleanupStack, log: (line: string) => void): Promise<number>;
}

/**
 * Runs a bench command and exits with its code: 2 for bad flags, 1 for a
 * failure, 130 after Ctrl-C or SIGTERM. Whichever way the run ends, its
 * cleanup stack stops the children and the database before the exit.
 */
export function runBenchCommand<Options>(command: BenchCommand<Options>): void {
  const log = (line: string) => console.log(`[${command.tag}] ${line}`);
  const main = async (): Promise<number> => {
    let options: Options | 'help';
    try {
      options = command.parse(process.argv.slice(2));
    } catch (error) {
      console.error(`${error instanceof Error ? error.message : String(error)}\n\n${command.usage}`);
      return 2;
    }
    if (options === 'help') {
      console.log(command.usage);
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
      return await command.session(options, cleanup, log);
    } catch (error) {
      if (!interrupted) console.error(`[${command.tag}] failed:`, error);
      return 1;
    } finally {
      await cleanup.run();
    }
  };
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      console.error(`[${command.tag}] failed:`, error);
      process.exit(1);
    },
  );
}
