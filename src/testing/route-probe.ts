import { AssertionError } from 'node:assert';
import { REPLAYED_HEADER } from '../idempotency/outcome/recorded-outcome.js';

/** A Nest application after `await app.listen(0)`, or anything else that knows its URL. */
export interface ListeningApp {
  /** The URL the app listens on. */
  getUrl(): Promise<string>;
}

/** One answer, read whole. */
export interface Answer {
  status: number;
  headers: Headers;
  body: Buffer;
}

/** Sends one route's requests over HTTP with `fetch`, and phrases what went wrong. */
export class RouteProbe {
  private constructor(
    readonly method: string,
    readonly url: string,
    /** `POST /orders`, for messages. */
    readonly label: string,
    private readonly headers: Record<string, string>,
    private readonly headerName: string,
  ) {}

  static async of(app: ListeningApp | string | URL, method: string, path: string, headers: Record<string, string>, headerName: string): Promise<RouteProbe> {
    const base = typeof app === 'string' || app instanceof URL ? String(app) : await urlOf(app);
    const url = new URL(path, base).toString();
    return new RouteProbe(method.toUpperCase(), url, `${method.toUpperCase()} ${path}`, headers, headerName);
  }

  /** Sends `body` (JSON unless a string), with the key header when `key` is given. */
  async send(body: unknown, key: string | undefined): Promise<Answer> {
    const headers = new Headers(this.headers);
    if (key !== undefined) headers.set(this.headerName, key);
    if (body !== undefined && typeof body !== 'string' && !headers.has('content-type')) headers.set('content-type', 'application/json');
    const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    let response: Response;
    try {
      response = await fetch(this.url, { method: this.method, headers, body: payload });
    } catch (error) {
      throw new Error(`${this.label}: the request to ${this.url} failed: ${(error as Error).message}`, { cause: error });
    }
    return { status: response.status, headers: response.headers, body: Buffer.from(await response.arrayBuffer()) };
  }

  /** Throws an AssertionError saying which check failed and how, unless `passed`. */
  check(passed: boolean, message: string, actual?: unknown, expected?: unknown): void {
    if (!passed) throw new AssertionError({ message: `${this.label}: ${message}`, actual, expected, operator: 'assertIdempotentRoute' });
  }
}

export function isReplay(answer: Answer): boolean {
  return answer.headers.get(REPLAYED_HEADER) === 'true';
}

/** `201 {"id":1}`: the status and the start of the body, for messages. */
export function describe(answer: Answer): string {
  const text = answer.body.toString('utf8');
  return `${answer.status}${text ? ` ${text.length > 200 ? `${text.slice(0, 200)}…` : text}` : ''}`;
}

async function urlOf(app: ListeningApp): Promise<string> {
  try {
    return await app.getUrl();
  } catch (error) {
    throw new Error(`assertIdempotentRoute: the app has no URL (${(error as Error).message}); call \`await app.listen(0)\` first, or pass its URL`, { cause: error });
  }
}
