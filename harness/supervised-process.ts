import { type ChildProcess, spawn } from 'node:child_process';
import type { Writable } from 'node:stream';

/** How long a child may take to close after SIGTERM before it is killed. */
const STOP_GRACE_MS = 5_000;

/** How one supervised Node process is started, and where its output goes. */
export interface SupervisedProcessOptions {
  /** The compiled script to run. */
  script: string;
  args?: readonly string[];
  /** Node flags; none are inherited (no --inspect or loader flags of the parent). */
  execArgv?: readonly string[];
  /** Added to the parent's environment. */
  env?: Record<string, string>;
  /** Whether it gets an IPC channel (`process.send`), as `fork()` gives. */
  ipc?: boolean;
  /**
   * `inherit`: straight to the parent's stdout and stderr. Otherwise every
   * line goes to `log`, prefixed with `[name] `, and the last `tailLines`
   * are kept for the message of a crash.
   */
  output: 'inherit' | { log: Writable; name: string; tailLines: number };
}

/** How a supervised process ended. */
export interface ProcessEnd {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Whether the supervisor ended it (stop, kill), rather than it exiting on its own. */
  stoppedBySupervisor: boolean;
}

/**
 * A Node child process of a bench or chaos run: its end as a promise, its last lines of output, and a stop that escalates
 * from SIGTERM to SIGKILL. The bench's app and load generator, the chaos
 * run's demo instances and its workers all run as one of these.
 */
export class SupervisedProcess {
  readonly child: ChildProcess;
  /** Settles once the process ended and its output was all read. */
  readonly ended: Promise<ProcessEnd>;
  /** The last lines it wrote, when its output is not inherited. */
  readonly tail: string[] = [];
  private stoppedBySupervisor = false;
  private readonly lineListeners: Array<(line: string) => void> = [];
  private stopping: Promise<void> | undefined;

  constructor(options: SupervisedProcessOptions) {
    const output = options.output;
    const stream = output === 'inherit' ? 'inherit' : 'pipe';
    this.child = spawn(process.execPath, [...(options.execArgv ?? []), options.script, ...(options.args ?? [])], {
      env: { ...process.env, ...options.env },
      stdio: ['ignore', stream, stream, ...(options.ipc ? (['ipc'] as const) : [])],
    });
    if (output !== 'inherit') {
      output.log.write(`--- ${output.name} started (pid ${this.child.pid}) at ${new Date().toISOString()}\n`);
      const record = (chunk: Buffer) => {
        const lines = chunk.toString('utf8').split('\n').filter(Boolean);
        for (const line of lines) {
          output.log.write(`[${output.name}] ${line}\n`);
          for (const listener of this.lineListeners) listener(line);
        }
        this.tail.push(...lines);
        this.tail.splice(0, Math.max(0, this.tail.length - output.tailLines));
      };
      this.child.stdout!.on('data', record);
      this.child.stderr!.on('data', record);
    }
    this.ended = new Promise((resolve) =>
      // 'close', not 'exit': by then every line it wrote has been read.
      this.child.once('close', (code, signal) => {
        if (output !== 'inherit') output.log.write(`--- ${output.name} exited (code ${code}, signal ${signal})\n`);
        resolve({ code, signal, stoppedBySupervisor: this.stoppedBySupervisor });
      }),
    );
  }

  /** Calls `listener` with every later line of its output, when it is not inherited. */
  onLine(listener: (line: string) => void): void {
    this.lineListeners.push(listener);
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** SIGTERM, then SIGKILL after a grace period; resolves once it ended. Safe to call twice. */
  stop(): Promise<void> {
    this.stopping ??= this.end('SIGTERM');
    return this.stopping;
  }

  /** SIGKILL: no shutdown hook runs. Resolves once it ended. */
  kill(): Promise<void> {
    return this.end('SIGKILL');
  }

  /** SIGKILL without waiting: the last resort on an interrupt. */
  killNow(): void {
    if (!this.running) return;
    this.stoppedBySupervisor = true;
    this.child.kill('SIGKILL');
  }

  private async end(signal: NodeJS.Signals): Promise<void> {
    if (this.running) {
      this.stoppedBySupervisor = true;
      this.child.kill(signal);
      const timer = signal === 'SIGKILL' ? undefined : setTimeout(() => this.child.kill('SIGKILL'), STOP_GRACE_MS);
      await this.ended;
      clearTimeout(timer);
    }
    await this.ended;
  }

  /** The next IPC message that `accept`s, or a rejection when the process ends first or `timeoutMs` passes. */
  nextMessage<T>(accept: (message: unknown) => message is T, timeoutMs: number, what: string): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const onMessage = (message: unknown) => {
        if (!accept(message)) return;
        done();
        resolve(message);
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        this.child.off('message', onMessage);
      };
      this.child.on('message', onMessage);
      void this.ended.then((end) => {
        done();
        reject(new Error(`${what}: the process exited (code ${end.code}) first`));
      });
    });
  }
}
