import { AsyncLocalStorage } from 'node:async_hooks';

/** A context: one value per slot, copied with the slot changed at each `ContextSlot.run()`. */
type Context = Readonly<Record<symbol, unknown>>;

/**
 * The module's one AsyncLocalStorage. On Node 20 and 22 every
 * AsyncLocalStorage that was ever entered copies its store into every
 * promise and async resource the process creates, requests without the
 * module included; so the module's concerns (the handler's run, the
 * operation, the current manager, the unit of work, a request escaped from)
 * share one storage, each in a slot of its own.
 */
const storage = new AsyncLocalStorage<Context>();

/**
 * One value that work inherits from the code that started it, as an
 * AsyncLocalStorage of its own would keep it: `run()` sets it for `work`
 * and everything `work` starts, and leaves the other slots as they are.
 */
export class ContextSlot<T> {
  private readonly key: symbol;

  constructor(description: string) {
    this.key = Symbol(description);
  }

  /** The value the caller runs with, if any. */
  get(): T | undefined {
    return storage.getStore()?.[this.key] as T | undefined;
  }

  /** Runs `work` with `value` in this slot (undefined: none, as AsyncLocalStorage's `exit()`). */
  run<R>(value: T | undefined, work: () => R): R {
    return storage.run({ ...storage.getStore(), [this.key]: value }, work);
  }
}
