import type { Observable } from 'rxjs';
import { ContextSlot } from '../transactions/request-context.js';

const runs = new ContextSlot<HandlerRun>('handler run');

/** What became of a handler a flow waited for. */
export type HandlerSettlement = 'settled' | 'still-running';

/**
 * The handler of one call a flow runs, as the code it started sees it.
 *
 * The flow learns that the handler ended from its Observable, but an
 * operator on that Observable may give up on it first: `timeout()` answers
 * 408, `Promise.all` rejects at the first failure while its other branches
 * go on writing. Without the module nothing waits for that code; with it,
 * the request's transaction, and so its key, must stay with it until it has
 * settled, or a retry would run beside it and its writes would have no
 * transaction left to go to.
 *
 * `@Idempotent()` wraps the methods it decorates so that the first call of
 * one inside a run (the handler Nest calls) is recorded here; what it
 * returns, a promise as a rule, is what the flow waits for.
 */
export class HandlerRun {
  private called = false;
  /** Set while the handler's promise is pending. */
  private running?: Promise<unknown>;

  /** Runs `work` (which calls the handler) as a new run. */
  static watch<T>(work: () => T): { run: HandlerRun; result: T } {
    const run = new HandlerRun();
    return { run, result: runs.run(run, work) };
  }

  /** Called by a decorated method with what it returned: the first such call of a run is its handler. */
  static called(returned: unknown): void {
    const run = runs.get();
    if (!run || run.called) return;
    run.called = true;
    if (typeof (returned as PromiseLike<unknown> | undefined)?.then !== 'function') return;
    const ended = () => {
      run.running = undefined;
    };
    run.running = Promise.resolve(returned).then(ended, ended);
  }

  /** Whether the handler was called and has not settled yet. */
  get isRunning(): boolean {
    return this.running !== undefined;
  }

  /** Whether the handler settled within `ms`; at once when it was never called or returned no promise. */
  async settled(ms: number): Promise<HandlerSettlement> {
    // As a rule it has settled by the time its Observable has, and no timer is needed.
    return !this.running || (await settlesWithin(this.running, ms)) ? 'settled' : 'still-running';
  }
}

/** Whether `work` settles (either way) within `ms`. */
export async function settlesWithin(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([work.then(() => true, () => true), expired]);
  } finally {
    clearTimeout(timer);
  }
}

/** The handler's Observable was given up on by an operator around the route (an outer `timeout()`): nothing will read its answer. */
export class HandlerAbandonedError extends Error {
  constructor() {
    super('An interceptor around the route gave up on it (a timeout?): its writes roll back, and its answer is the interceptor’s.');
    this.name = 'HandlerAbandonedError';
  }
}

/** The handler's Observable ended, and its own work had not settled within `settleTimeout`. */
export class HandlerStillRunningError extends Error {
  constructor(settleTimeout: number) {
    super(
      `The handler was still running ${settleTimeout} ms after its Observable ended, so its request rolled back and its later writes throw TransactionClosedError. ` +
        'An interceptor answered without waiting for it: raise settleTimeout, or let the handler finish within it.',
    );
    this.name = 'HandlerStillRunningError';
  }
}

/**
 * Whether the caller gave up on a call: an operator around the route (an
 * outer `timeout()`) unsubscribed from it. Lighter than an AbortSignal, of
 * which one per request would cost microseconds to listen to.
 */
export class Abandonment {
  private abandoned = false;
  private readonly listeners: Array<() => void> = [];

  get isAbandoned(): boolean {
    return this.abandoned;
  }

  abandon(): void {
    if (this.abandoned) return;
    this.abandoned = true;
    for (const listener of this.listeners.splice(0)) listener();
  }

  /** Calls `listener` once abandoned (at once if it is); returns how to stop listening. */
  onAbandon(listener: () => void): () => void {
    if (this.abandoned) listener();
    else this.listeners.push(listener);
    return () => {
      const at = this.listeners.indexOf(listener);
      if (at >= 0) this.listeners.splice(at, 1);
    };
  }
}

/**
 * The last value of `source` (undefined if none), or its error; once
 * abandoned, `HandlerAbandonedError`, after unsubscribing from it as the
 * operator that gave up on the route would have.
 */
export function lastValueUnlessAbandoned<T>(source: Observable<T>, abandonment?: Abandonment): Promise<T | undefined> {
  return new Promise<T | undefined>((resolve, reject) => {
    let last: T | undefined;
    let stopListening: (() => void) | undefined;
    const subscription = source.subscribe({
      next: (value) => {
        last = value;
      },
      error: (error: unknown) => {
        stopListening?.();
        reject(error);
      },
      complete: () => {
        stopListening?.();
        resolve(last);
      },
    });
    if (!abandonment || subscription.closed) return;
    stopListening = abandonment.onAbandon(() => {
      subscription.unsubscribe();
      reject(new HandlerAbandonedError());
    });
  });
}
