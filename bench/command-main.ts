import { CleanupStack } from '../harness/cleanup-stack.js';
import { type CommandLine, type CommandLineValues, type Flag, parseCommandLine, usageOf } from '../harness/command-line.js';

/** One bench command: its flags, how they become its settings, and what it runs. */
export interface BenchCommand<Flags extends Record<string, Flag<unknown>>, Options> {
  /** Prefixes every line it logs, e.g. `bench` gives `[bench] …`. */
  tag: string;
  line: CommandLine<Flags>;
  /** The settings from the parsed flags; throws with a message naming a bad flag. */
  options(values: CommandLineValues<Flags>): Options;
  /** The run itself; resolves to the exit code. Everything it starts goes on `cleanup`. */
  session(options: Options, cleanup: CleanupStack, log: (line: string) => void): Promise<number>;
}

/**
 * Runs a bench command and exits with its code: 2 for bad flags, 1 for a
 * failure, 130 after Ctrl-C or SIGTERM. Whichever way the run ends, its
 * cleanup stack stops the children and the database before the exit.
 */
export function runBenchCommand<Flags extends Record<string, Flag<unknown>>, Options>(command: BenchCommand<Flags, Options>): void {
  const log = (line: string) => console.log(`[${command.tag}] ${line}`);
  const usage = usageOf(command.line);
  const main = async (): Promise<number> => {
    let options: Options;
    try {
      const values = parseCommandLine(command.line, process.argv.slice(2));
      if (values === 'help') {
        console.log(usage);
        return 0;
      }
      options = command.options(values);
    } catch (error) {
      console.error(`${error instanceof Error ? error.message : String(error)}\n\n${usage}`);
      return 2;
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
