/**
 * The methods every way of writing a Node response ends in (Express's
 * `send()`, `json()`, `redirect()`, a piped stream), Fastify's own `send()`
 * and `hijack()`, and the `then()` of Fastify's reply, which settles once
 * the response has been sent.
 */
type WriteMethod = 'writeHead' | 'write' | 'end' | 'flushHeaders' | 'send' | 'hijack' | 'then';
const RAW_WRITES: readonly WriteMethod[] = ['writeHead', 'write', 'end', 'flushHeaders'];
// hijack() would take the reply from Fastify, and so from the module's answer too: held back like a write.
const REPLY_WRITES: readonly WriteMethod[] = ['send', 'hijack', 'then'];

type Write = (...args: unknown[]) => unknown;
type Writable = Record<WriteMethod, Write>;

/** The guard of each held response, and of its raw Node response. */
const guards = new WeakMap<object, ResponseGuard>();
/** The objects whose write methods already look the guard up, and the methods they had. */
const wrapped = new WeakMap<object, Partial<Record<WriteMethod, Write>>>();

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
 *
 * It is held on every request that runs a handler, so its write methods
 * are wrapped once where that is cheap, and look the guard up here: a
 * response nobody holds writes as it always did. Where the response's
 * prototype is a layer the app made for its own responses (Express's
 * `app.response`, a Fastify instance's reply), they are wrapped on that
 * layer, once: Express sets each response's prototype with
 * `Object.setPrototypeOf`, after which every property added to the response
 * costs about 2 KB of garbage. A prototype that defines the methods itself
 * (Node's `ServerResponse`, under Fastify's reply, which every server of the
 * process shares) is never changed: the response gets them as properties of
 * its own instead.
 */
export class ResponseGuard {
  /** The first write the handler made itself, e.g. `res.end()`. */
  private heldWrite?: string;
  /** Holding while the handler runs; open for the module's answer; closed once that answer ended. */
  private mode: 'holding' | 'open' | 'closed' = 'holding';
  /** Set once an operator around the route gave up on it: the response is the app's again. */
  private abandoned = false;
  private readonly raw: Writable;
  private readonly statusBefore: number;
  private readonly headersBefore: Array<[string, HeaderValue]>;

  private constructor(private readonly response: HttpResponse) {
    this.statusBefore = response.statusCode;
    this.headersBefore = Object.entries(response.getHeaders());
    this.raw = (response.raw ?? response) as unknown as Writable;
  }

  /** Starts holding `response` (an Express response or a Fastify reply). */
  static hold(response: unknown): ResponseGuard {
    const target = response as HttpResponse;
    const guard = new ResponseGuard(target);
    wrapWrites(guard.raw, RAW_WRITES);
    guards.set(guard.raw, guard);
    if (target.raw) {
      wrapWrites(target as unknown as Writable, REPLY_WRITES);
      guards.set(target, guard);
    }
    // A stream piped into the response writes only later, maybe after the handler returned: the pipe itself is the write.
    (guard.raw as unknown as NodeJS.EventEmitter).on('pipe', onPipe);
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
    if (this.abandoned) return;
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
    if (this.abandoned) return;
    (this.raw as unknown as NodeJS.EventEmitter).off('pipe', onPipe);
    if (this.heldWrite === undefined) {
      guards.delete(this.raw);
      guards.delete(this.response);
      return;
    }
    this.restore();
    this.mode = 'open';
  }

  /**
   * Stops holding for good: an operator around the route (an outer
   * `timeout()`) gave up on it, and Nest answers what that operator threw,
   * through this response, while the module will answer nothing. What the
   * handler wrote before stays held back.
   */
  abandon(): void {
    this.abandoned = true;
    (this.raw as unknown as NodeJS.EventEmitter).off('pipe', onPipe);
    guards.delete(this.raw);
    guards.delete(this.response);
  }

  /** A write on a held response: held back, or, once open, the module's answer going through. */
  private write(target: object, name: WriteMethod, original: Write, args: unknown[]): unknown {
    if (name === 'then') return this.awaited(target, original, args);
    if (this.mode === 'open') {
      const result = original.apply(target, args);
      if (name === 'end') this.mode = 'closed';
      return result;
    }
    if (this.mode === 'holding') this.heldWrite ??= target === this.raw ? `res.${name}()` : `reply.${name}()`;
    // Held back: a caller that waits on the write's callback goes on, and finds out from the module's answer.
    const callback = args.find((arg): arg is () => void => typeof arg === 'function');
    if (callback) process.nextTick(callback);
    return name === 'write' ? true : target;
  }

  /**
   * `await reply` (a handler's `return reply.send(…)`): Fastify settles it
   * once the response is sent, which a held write never is, and the module
   * answers only once the handler has settled. So after a held write it
   * settles at once, as the write's callback does.
   */
  private awaited(target: object, original: Write, args: unknown[]): unknown {
    if (this.mode !== 'holding' || this.heldWrite === undefined) return original.apply(target, args);
    const fulfilled = args[0];
    if (typeof fulfilled === 'function') process.nextTick(fulfilled);
    return undefined;
  }

  /** A pipe into a held response. */
  private piped(): void {
    if (this.mode === 'holding') this.heldWrite ??= 'a stream piped into it';
  }

  /** What a wrapped write method does. */
  static written(target: object, name: WriteMethod, original: Write, args: unknown[]): unknown {
    const guard = guards.get(target);
    return guard ? guard.write(target, name, original, args) : original.apply(target, args);
  }

  static onPipe(target: object): void {
    guards.get(target)?.piped();
  }
}

function onPipe(this: object): void {
  ResponseGuard.onPipe(this);
}

/**
 * Wraps the write methods of `target` where that touches no other app's
 * responses: once, on its prototype, where that layer inherits them; on
 * `target` itself where the prototype defines them (a class of Node's or of
 * a library's, shared by every app of the process).
 */
function wrapWrites(target: Writable, names: readonly WriteMethod[]): void {
  const prototype = Object.getPrototypeOf(target) as Writable;
  const place = names.some((name) => Object.hasOwn(prototype, name) && !wrapped.has(prototype)) ? target : prototype;
  const done = wrapped.get(place) ?? {};
  wrapped.set(place, done);
  for (const name of names) {
    if (done[name]) continue;
    const original = place[name];
    done[name] = original;
    place[name] = function (this: object, ...args: unknown[]) {
      return ResponseGuard.written(this, name, original, args);
    };
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
