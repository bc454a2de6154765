/** The methods every way of writing a Node response ends in: Express's `send()`, `json()`, `redirect()`, a piped stream. */
const RAW_WRITES = ['writeHead', 'write', 'end', 'flushHeaders'] as const;

const guards = new WeakMap<object, ResponseGuard>();

/**
 * Holds an Express response or a Fastify reply while an idempotent handler
 * runs. The module answers once the transaction has ended, so what the
 * handler writes to the response itself (`res.send()`, `res.write()`,
 * `reply.send()`, a stream piped into it) is held back, never sent: a 2xx
 * for work that then rolls back would be a lie. The flow answers such a
 * handler with a 500 problem instead (see `captureSuccess`).
 *
 * It also keeps the status and headers the handler found, to put back when
 * the handler's own outcome is not the one sent (a duplicate claimed at
 * commit that lost to the winner, a held write).
 */
export class ResponseGuard {
  /** The first write the handler made itself, e.g. `res.end()`. */
  private heldWrite?: string;
  /** Holding while the handler runs; open for the module's answer; closed once that answer ended. */
  private mode: 'holding' | 'open' | 'closed' = 'holding';
  private readonly undo: Array<() => void> = [];
  private readonly statusBefore: number;
  private readonly headersBefore: Array<[string, HeaderValue]>;

  private constructor(private readonly response: HttpResponse) {
    this.statusBefore = response.statusCode;
    this.headersBefore = Object.entries(response.getHeaders());
  }

  /** Starts holding `response` (an Express response or a Fastify reply). */
  static hold(response: unknown): ResponseGuard {
    const target = response as HttpResponse;
    const guard = new ResponseGuard(target);
    const raw = target.raw ?? target;
    for (const name of RAW_WRITES) guard.intercept(raw, name, `res.${name}()`);
    if (target.raw) guard.intercept(target, 'send', 'reply.send()');
    // A stream piped into the response writes only later, maybe after the handler returned: the pipe itself is the write.
    const piped = () => {
      if (guard.mode === 'holding') guard.heldWrite ??= 'a stream piped into it';
    };
    (raw as unknown as NodeJS.EventEmitter).on('pipe', piped);
    guard.undo.push(() => (raw as unknown as NodeJS.EventEmitter).off('pipe', piped));
    guards.set(target, guard);
    return guard;
  }

  /** The guard holding `response`, if any. */
  static of(response: unknown): ResponseGuard | undefined {
    return guards.get(response as object);
  }

  /** What the handler wrote to the response itself; undefined when nothing. */
  get written(): string | undefined {
    return this.heldWrite;
  }

  /** Puts back the status and headers the handler found. */
  restore(): void {
    const target = this.response;
    const kept = new Set(this.headersBefore.map(([name]) => name));
    for (const name of Object.keys(target.getHeaders())) {
      if (kept.has(name)) continue;
      target.removeHeader(name);
      target.raw?.removeHeader(name); // a Fastify reply keeps headers of its own and on its raw response
    }
    for (const [name, value] of this.headersBefore) {
      if (value === undefined) continue;
      if (target.raw) target.header!(name, value);
      else target.setHeader!(name, value);
    }
    target.statusCode = this.statusBefore;
  }

  /**
   * Lets the module's answer out. Nothing held back is ever sent. With
   * nothing held, the response is as Nest made it again; after a held write,
   * the answer goes out and whatever is written after its end is dropped (a
   * stream of the handler's, still writing into a response that was answered).
   */
  release(): void {
    guards.delete(this.response);
    if (this.heldWrite === undefined) {
      for (const undo of this.undo.reverse()) undo();
      return;
    }
    this.restore();
    this.mode = 'open';
  }

  private intercept(target: object, name: string, label: string): void {
    const own = Object.getOwnPropertyDescriptor(target, name);
    const original = (target as Record<string, (...args: unknown[]) => unknown>)[name];
    const guard = this;
    Object.defineProperty(target, name, {
      configurable: true,
      writable: true,
      value: function (this: unknown, ...args: unknown[]) {
        if (guard.mode === 'open') {
          const result = original.apply(this, args);
          if (name === 'end') guard.mode = 'closed';
          return result;
        }
        if (guard.mode === 'holding') guard.heldWrite ??= label;
        // Held back: a caller that waits on the write's callback goes on, and finds out from the module's answer.
        const callback = args.find((arg): arg is () => void => typeof arg === 'function');
        if (callback) process.nextTick(callback);
        return name === 'write' ? true : this;
      },
    });
    this.undo.push(() => {
      if (own) Object.defineProperty(target, name, own);
      else delete (target as Record<string, unknown>)[name];
    });
  }
}

type HeaderValue = string | string[] | number | undefined;

/** What Express's response (a Node ServerResponse) and Fastify's reply both offer, and where they differ. */
interface HttpResponse {
  statusCode: number;
  getHeaders(): Record<string, HeaderValue>;
  removeHeader(name: string): void;
  /** Express: Node's ServerResponse. */
  setHeader?(name: string, value: string | string[] | number): void;
  /** Fastify: the reply's own setter, and the Node response under it. */
  header?(name: string, value: string | string[] | number): void;
  raw?: { removeHeader(name: string): void };
}
