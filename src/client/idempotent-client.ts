import { randomUUID } from 'node:crypto';
import { setTimeout as wait } from 'node:timers/promises';
import { backoffDelay, retryAfterMs } from './backoff.js';

/** How a client reaches an idempotent HTTP API, and how hard it retries. */
export interface IdempotentClientOptions {
  /** One or more instances of the same API; attempts are spread over them. */
  baseUrls: string | readonly string[];
  /** Sent on every request, e.g. `Authorization`; a request's own headers win. */
  headers?: Record<string, string>;
  /** Default `Idempotency-Key`. */
  keyHeader?: string;
  /** Attempts per operation, the first included. Default 5. */
  maxAttempts?: number;
  /** Ceiling of the first backoff; it doubles per attempt. Default 100 ms. */
  baseDelayMs?: number;
  /** Cap of the backoff ceiling (not of `Retry-After`). Default 5000 ms. */
  maxDelayMs?: number;
  /** Budget of one operation, from its first attempt: no attempt or wait goes past it. Default 30000 ms. */
  deadlineMs?: number;
  /** An attempt, body included, is abandoned (and retried) after this. Default 10000 ms. */
  attemptTimeoutMs?: number;
  /**
   * Statuses that mean "retry with the same key". Default 409 (in flight)
   * and 503 (the outcome is not known yet: a lost database connection, or a
   * phased operation that started and did not finish). A 500 of this API
   * means the work rolled back, so it is final. An answer marked
   * `Idempotent-Replayed` is a recorded outcome and final whatever its status.
   */
  retryableStatuses?: readonly number[];
  /** Which base URL an attempt goes to. Default `round-robin`, so a retry moves to the next instance. */
  targetSelection?: 'round-robin' | 'random';
  /** Default the global (undici) fetch. */
  fetch?: typeof fetch;
  /** Default a timer; inject to make backoff instant in tests. */
  sleep?: (ms: number) => Promise<void>;
  /** A source in [0, 1) for jitter and random targets. Default `Math.random`. */
  random?: () => number;
  /** Wall clock in ms, for the deadline and `Retry-After` dates. Default `Date.now`. */
  now?: () => number;
  /** Makes the key of an operation that brings none. Default `crypto.randomUUID`. */
  newKey?: () => string;
}

/** One logical operation: every attempt sends the same method, path, headers, body and key. */
export interface IdempotentRequest {
  /** Default `POST`. */
  method?: string;
  /** Appended to the base URL, e.g. `/orders`. */
  path: string;
  /** A string is sent as is; anything else as JSON (with `Content-Type: application/json`). */
  body?: unknown;
  /** The idempotency key; a fresh one when absent. */
  key?: string;
  /** Over the client's default headers. */
  headers?: Record<string, string>;
}

/** A response, fully read. */
export interface ClientResponse {
  status: number;
  /** Lower-case names. */
  headers: Record<string, string>;
  text: string;
  /** The parsed body when the content type is JSON (`+json` included) and it parses. */
  json?: unknown;
}

/** What one attempt of an operation met, for logs. */
export interface AttemptOutcome {
  /** 1-based. */
  attempt: number;
  baseUrl: string;
  /** The response status, when a response came. */
  status?: number;
  /** The failure code when none came, e.g. `ECONNREFUSED`, `UND_ERR_SOCKET`, `TimeoutError`. */
  error?: string;
  durationMs: number;
  /** The wait before the next attempt; absent after the last. */
  nextDelayMs?: number;
}

/** Why the client stopped: a final answer, or a retryable failure it ran out of attempts or time for. */
export type StopReason = 'answered' | 'max-attempts' | 'deadline';

/** The outcome of an operation across its attempts. */
export interface SendResult {
  key: string;
  /** The last attempt's response; absent when it failed without one. */
  response?: ClientResponse;
  /** The last attempt's failure code when it had no response. */
  error?: string;
  attempts: number;
  /** The server answered from its record (`Idempotent-Replayed: true`) rather than running the work. */
  replayed: boolean;
  stoppedBy: StopReason;
  outcomes: AttemptOutcome[];
}

type AttemptResult = { response: ClientResponse; error?: undefined } | { response?: undefined; error: string };

const REPLAYED_HEADER = 'idempotent-replayed';
const JSON_CONTENT_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;

/**
 * Sends operations to an idempotent HTTP API, retrying with one key per
 * operation so the server can tell a retry from new work. Network failures
 * and the retryable statuses are retried with capped, fully jittered
 * exponential backoff; `Retry-After` sets a floor on the next wait. A
 * replayed answer (a recorded outcome) and any other status end the operation.
 */
export class IdempotentClient {
  private readonly baseUrls: readonly string[];
  private readonly settings: Required<Omit<IdempotentClientOptions, 'baseUrls' | 'retryableStatuses'>>;
  private readonly retryableStatuses: ReadonlySet<number>;
  private cursor = 0;

  constructor(options: IdempotentClientOptions) {
    const urls = typeof options.baseUrls === 'string' ? [options.baseUrls] : [...options.baseUrls];
    if (urls.length === 0) throw new RangeError('baseUrls must name at least one URL');
    // Parsed now: a bad URL would otherwise look like a network error and be retried.
    this.baseUrls = urls.map((url) => new URL(url).href.replace(/\/+$/, ''));
    this.retryableStatuses = new Set(options.retryableStatuses ?? [409, 503]);
    this.settings = {
      headers: options.headers ?? {},
      keyHeader: options.keyHeader ?? 'Idempotency-Key',
      maxAttempts: Math.max(1, options.maxAttempts ?? 5),
      baseDelayMs: options.baseDelayMs ?? 100,
      maxDelayMs: options.maxDelayMs ?? 5000,
      deadlineMs: options.deadlineMs ?? 30_000,
      attemptTimeoutMs: options.attemptTimeoutMs ?? 10_000,
      targetSelection: options.targetSelection ?? 'round-robin',
      fetch: options.fetch ?? globalThis.fetch,
      sleep: options.sleep ?? ((ms) => wait(ms)),
      random: options.random ?? Math.random,
      now: options.now ?? Date.now,
      newKey: options.newKey ?? randomUUID,
    };
  }

  /** Sends one operation until it gets a final answer, or runs out of attempts or time. Rejects only on invalid input. */
  async send(request: IdempotentRequest): Promise<SendResult> {
    const { maxAttempts, now } = this.settings;
    const key = request.key ?? this.settings.newKey();
    // Built once, before any attempt: an invalid header value throws here instead of counting as a network failure.
    const headers = new Headers(this.settings.headers);
    for (const [name, value] of Object.entries(request.headers ?? {})) headers.set(name, value);
    headers.set(this.settings.keyHeader, key);
    const body = serializeBody(request.body, headers);
    const deadline = now() + this.settings.deadlineMs;
    const outcomes: AttemptOutcome[] = [];
    const finish = (result: AttemptResult, stoppedBy: StopReason): SendResult => ({
      key,
      ...result,
      attempts: outcomes.length,
      replayed: result.response !== undefined && isReplay(result.response),
      stoppedBy,
      outcomes,
    });

    for (let attempt = 1; ; attempt++) {
      const baseUrl = this.nextBaseUrl();
      const started = now();
      const timeoutMs = Math.min(this.settings.attemptTimeoutMs, deadline - started);
      const result = await this.attempt(baseUrl + request.path, request.method ?? 'POST', headers, body, timeoutMs);
      const outcome: AttemptOutcome = { attempt, baseUrl, durationMs: now() - started };
      if (result.response) outcome.status = result.response.status;
      else outcome.error = result.error;
      outcomes.push(outcome);

      if (result.response && (isReplay(result.response) || !this.retryableStatuses.has(result.response.status))) return finish(result, 'answered');
      if (attempt >= maxAttempts) return finish(result, 'max-attempts');
      const delayMs = this.delayAfter(attempt, result.response);
      if (now() + delayMs >= deadline) return finish(result, 'deadline');
      outcome.nextDelayMs = delayMs;
      await this.settings.sleep(delayMs);
    }
  }

  private async attempt(url: string, method: string, headers: Headers, body: string | undefined, timeoutMs: number): Promise<AttemptResult> {
    try {
      // Redirects are reported, not followed: following one would turn a POST into a GET.
      const signal = AbortSignal.timeout(Math.max(1, Math.ceil(timeoutMs)));
      const response = await this.settings.fetch(url, { method, headers, body, signal, redirect: 'manual' });
      const text = await response.text();
      return { response: toClientResponse(response, text) };
    } catch (error) {
      return { error: failureCode(error) };
    }
  }

  /** Backoff, raised to what `Retry-After` asks: the server knows better when it will be ready. */
  private delayAfter(attempt: number, response: ClientResponse | undefined): number {
    const jittered = backoffDelay(attempt, this.settings, this.settings.random);
    const asked = retryAfterMs(response?.headers['retry-after'], this.settings.now()) ?? 0;
    return Math.max(jittered, asked);
  }

  private nextBaseUrl(): string {
    const count = this.baseUrls.length;
    if (this.settings.targetSelection === 'random') return this.baseUrls[Math.floor(this.settings.random() * count) % count];
    return this.baseUrls[this.cursor++ % count];
  }
}

/** The server answered from its record: the operation's final outcome. */
function isReplay(response: ClientResponse): boolean {
  return response.headers[REPLAYED_HEADER]?.trim().toLowerCase() === 'true';
}

function serializeBody(body: unknown, headers: Headers): string | undefined {
  if (body === undefined || typeof body === 'string') return body;
  if (!headers.has('content-type')) headers.set('content-type', 'application/json');
  return JSON.stringify(body);
}

function toClientResponse(response: Response, text: string): ClientResponse {
  const headers = Object.fromEntries(response.headers);
  const result: ClientResponse = { status: response.status, headers, text };
  if (JSON_CONTENT_TYPE.test(headers['content-type'] ?? '')) {
    try {
      result.json = JSON.parse(text);
    } catch {
      // A body that claims JSON but is not stays available as text.
    }
  }
  return result;
}

/** undici wraps socket errors in `TypeError('fetch failed')`; the useful code is on its cause. */
function failureCode(error: unknown): string {
  const failure = error as { name?: unknown; code?: unknown; cause?: { code?: unknown } } | null;
  if (typeof failure?.cause?.code === 'string') return failure.cause.code;
  if (typeof failure?.code === 'string') return failure.code;
  return typeof failure?.name === 'string' ? failure.name : 'Error';
}
