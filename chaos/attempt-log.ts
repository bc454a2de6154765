import { createWriteStream, type WriteStream } from 'node:fs';
import type { Operation } from './operations.js';

/** What one HTTP attempt of an operation met: logged for every attempt the client makes. */
export interface AttemptRecord {
  op: string;
  copy: number;
  phase: 'traffic' | 'verify';
  /** 1-based within its send. */
  attempt: number;
  /** Which app instance it went to. */
  instance: number;
  startedAt: number;
  endedAt: number;
  status?: number;
  /** The failure code when no response came, e.g. ECONNREFUSED. */
  error?: string;
  /** `Idempotent-Replayed: true` was on the response. */
  replayed: boolean;
  /** The exact response text. */
  body?: string;
  location?: string;
}

/**
 * The client's log: every attempt of every operation, kept in memory for the
 * invariants and written as JSON lines for a post-mortem. It sees the wire
 * through the `fetch` it gives the client, so it also records the responses
 * of attempts the client later retried.
 */
export class AttemptLog {
  private readonly byOperation = new Map<string, AttemptRecord[]>();
  private readonly file: WriteStream;
  count = 0;

  constructor(
    private readonly instanceUrls: readonly string[],
    path: string,
  ) {
    this.file = createWriteStream(path, { flags: 'w' });
    this.file.on('error', () => undefined);
  }

  /** The attempts of an operation, in the order they ended. */
  of(operationId: string): readonly AttemptRecord[] {
    return this.byOperation.get(operationId) ?? [];
  }

  /** A fetch for one send of `operation` that logs each attempt and hands the client an identical response. */
  fetchFor(operation: Operation, copy: number, phase: AttemptRecord['phase']): typeof fetch {
    let attempt = 0;
    return async (input, init) => {
      const url = String(input instanceof Request ? input.url : input);
      const record: AttemptRecord = {
        op: operation.id,
        copy,
        phase,
        attempt: ++attempt,
        instance: this.instanceUrls.findIndex((base) => url.startsWith(base + '/')),
        startedAt: Date.now(),
        endedAt: 0,
        replayed: false,
      };
      try {
        const response = await fetch(input, init);
        // Read here, under the client's own timeout signal, then handed back as a fresh response.
        const text = await response.text();
        record.status = response.status;
        record.replayed = response.headers.get('idempotent-replayed')?.trim().toLowerCase() === 'true';
        record.body = text;
        record.location = response.headers.get('location') ?? undefined;
        const empty = response.status === 204 || response.status === 304;
        return new Response(empty ? null : text, { status: response.status, statusText: response.statusText, headers: response.headers });
      } catch (error) {
        record.error = failureCode(error);
        throw error;
      } finally {
        record.endedAt = Date.now();
        this.add(record);
      }
    };
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.file.end(resolve));
  }

  private add(record: AttemptRecord): void {
    this.count++;
    const list = this.byOperation.get(record.op);
    if (list) list.push(record);
    else this.byOperation.set(record.op, [record]);
    this.file.write(`${JSON.stringify(record)}\n`);
  }
}

/** The same code the client reports: undici wraps socket errors in `TypeError('fetch failed')`. */
function failureCode(error: unknown): string {
  const failure = error as { name?: unknown; code?: unknown; cause?: { code?: unknown } } | null;
  if (typeof failure?.cause?.code === 'string') return failure.cause.code;
  if (typeof failure?.code === 'string') return failure.code;
  return typeof failure?.name === 'string' ? failure.name : 'Error';
}
