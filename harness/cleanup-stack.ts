/**
 * Things to undo at the end of a run, undone in reverse order of setup and
 * once only, whether the run ended normally, failed or was interrupted.
 */
export class CleanupStack {
  private readonly steps: Array<{ name: string; undo: () => Promise<unknown> }> = [];
  private running: Promise<void> | undefined;

  constructor(private readonly log: (line: string) => void) {}

  /** Registers `undo` to run at cleanup, before everything registered earlier. */
  add(name: string, undo: () => Promise<unknown>): void {
    this.steps.push({ name, undo });
  }

  /** Runs every step, each even when an earlier one failed. Calling it again waits for the same run. */
  run(): Promise<void> {
    this.running ??= (async () => {
      for (const step of [...this.steps].reverse()) {
        try {
          await step.undo();
        } catch (error) {
          this.log(`cleanup: ${step.name} failed: ${error instanceof Error ? error.message : String(error)}`);
        }
      }
    })();
    return this.running;
  }
}
