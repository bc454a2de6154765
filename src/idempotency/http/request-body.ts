import busboy from 'busboy';
import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { ReadBody } from '../fingerprint/request-fingerprint.js';
import { IdempotencyBodyIncompleteException, IdempotencyBodyNotFingerprintedException, IdempotencyBodyTooLargeException } from '../errors/idempotency.exceptions.js';

/**
 * Where a request's body stands when the module fingerprints it, before the
 * route's handler and the interceptors bound inside `@Idempotent()` run:
 * - `parsed`: a body parser read it (JSON, forms, Fastify's text), or there is none;
 * - `unread`: nothing has read it yet (a multipart upload that `FileInterceptor`
 *   will parse, text on Express without a text parser, binary);
 * - `hidden`: something read it but left no `body` (or `rawBody`) to fingerprint.
 */
export type BodyState = 'parsed' | 'unread' | 'hidden';

export function bodyStateOf(request: { body?: unknown; rawBody?: unknown; raw?: IncomingMessage } & Partial<IncomingMessage>): BodyState {
  const raw = request.raw ?? (request as IncomingMessage);
  const { headers } = raw;
  const length = headers['content-length'];
  if (headers['transfer-encoding'] === undefined && (length === undefined || length === '0')) return 'parsed';
  if (!raw.readableDidRead && !raw.readableEnded) return 'unread';
  return request.body === undefined && request.rawBody === undefined ? 'hidden' : 'parsed';
}

/**
 * How many bytes of a body no parser read the module reads, where neither
 * the route nor the module names a bound (`maxBodyBytes`): the app's own,
 * where its HTTP server says it (Fastify's `bodyLimit`, which bounds every
 * body its parsers read), else 1 MiB. Express's body parsers keep their
 * limits to themselves.
 */
export function appBodyLimitOf(server: unknown): number {
  const limit = (server as { initialConfig?: { bodyLimit?: unknown } } | undefined)?.initialConfig?.bodyLimit;
  return typeof limit === 'number' && Number.isSafeInteger(limit) && limit > 0 ? limit : 1024 * 1024;
}

/** The body of a request in the `hidden` state cannot be fingerprinted: refused, never replayed for another body. */
export function refuseHiddenBody(operation: string): never {
  throw new IdempotencyBodyNotFingerprintedException(operation);
}

/**
 * Reads an unread body to its end, for the fingerprint, and leaves every
 * byte in the request's stream: the handler, or an interceptor inside
 * `@Idempotent()` such as `FileInterceptor`, reads it as if nothing had.
 *
 * How: what the stream has buffered is read and put back at its head
 * (`unshift`), and what arrives after is seen as Node's HTTP parser pushes
 * it. The push answers "go on", so the socket keeps flowing while nobody
 * reads: the body waits in memory until it is read, up to `limit` bytes
 * (413 beyond). Each chunk is hashed (or parsed, for multipart) as it
 * arrives, so no step holds the event loop for the whole body.
 */
export function readUnreadBody(request: { raw?: IncomingMessage } & Partial<IncomingMessage>, limit: number): Promise<ReadBody> {
  const raw = request.raw ?? (request as IncomingMessage);
  const reader = bodyReaderFor(raw.headers, limit);
  return new Promise((resolve, reject) => {
    let size = 0;
    let settled = false;
    const push = raw.push;
    const settle = (error?: Error) => {
      if (settled) return;
      settled = true;
      delete (raw as Partial<IncomingMessage>).push; // the prototype's again
      raw.off('close', onClose);
      if (error) reject(error);
      else reader.end().then(resolve, reject);
    };
    const take = (chunk: Buffer | string) => {
      const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      size += bytes.length;
      if (size > limit) settle(new IdempotencyBodyTooLargeException(limit));
      else reader.write(bytes);
    };
    const onClose = () => settle(raw.complete ? undefined : new IdempotencyBodyIncompleteException());
    Object.defineProperty(raw, 'push', {
      configurable: true,
      writable: true,
      value(this: IncomingMessage, chunk: Buffer | string | null, encoding?: BufferEncoding) {
        push.call(this, chunk, encoding);
        if (chunk === null) settle();
        else if (!settled) take(chunk);
        return true;
      },
    });
    raw.on('close', onClose);
    // Reading what is buffered lets the parser resume a socket it paused at the stream's high-water mark.
    const buffered: Buffer | string | null = raw.read();
    if (buffered !== null) {
      take(buffered);
      raw.unshift(buffered);
    }
    if (raw.complete) settle();
  });
}

/** Takes a body's chunks as they arrive; `end()` gives what the fingerprint sees of it. */
interface BodyReader {
  write(chunk: Buffer): void;
  end(): Promise<ReadBody>;
}

/**
 * What the fingerprint sees of a body no parser read:
 * - `multipart/form-data`: the fields by name, each file as its name, type,
 *   size and SHA-256 (the boundary, which clients draw anew per request,
 *   does not count); every field whole, up to `limit` (413 beyond), never
 *   cut at a parser's default;
 * - anything else: its `Content-Type` as sent (charset included), size and
 *   SHA-256. The module parses no JSON, form or text of its own: a parser of
 *   the app's would have read a body it takes, so the handler reads these
 *   bytes itself, and the same bytes are the same request.
 * A field or file name given more than once keeps every value, in order.
 */
function bodyReaderFor(headers: IncomingHttpHeaders, limit: number): BodyReader {
  const type = (headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
  const bytes = bytesReader(headers['content-type'] ?? '');
  return type === 'multipart/form-data' ? multipartReader(headers, limit, bytes) : bytes;
}

function bytesReader(contentType: string): BodyReader {
  const hash = createHash('sha256');
  let size = 0;
  return {
    write(chunk) {
      hash.update(chunk);
      size += chunk.length;
    },
    end: async () => ({ readAs: 'bytes', body: { contentType: contentType.trim(), size, sha256: hash.digest('hex') } }),
  };
}

/** Multipart by its parts; a body busboy cannot read as multipart by its bytes (`whole`), as a retry sends the same ones. */
function multipartReader(headers: IncomingHttpHeaders, limit: number, whole: BodyReader): BodyReader {
  const parts: Array<[string, unknown]> = [];
  const files: Array<Promise<void>> = [];
  let failed = false;
  let parser: busboy.Busboy;
  try {
    // Field names and values as long as the whole body may be, so that none is ever cut (busboy cuts them at
    // 100 bytes and 1 MiB by default, and two fields that differ past that would read as one).
    parser = busboy({ headers, defParamCharset: 'utf8', limits: { fieldNameSize: limit, fieldSize: limit } });
  } catch {
    return whole; // no boundary, or not multipart after all
  }
  const closed = new Promise<void>((resolve) => {
    parser.on('close', resolve);
    parser.on('error', () => {
      failed = true;
      resolve();
    });
  });
  parser.on('field', (name, value) => parts.push([name, value]));
  parser.on('file', (name, stream, { filename, mimeType }) => {
    const part: [string, unknown] = [name, undefined];
    parts.push(part);
    const hash = createHash('sha256');
    let size = 0;
    files.push(
      new Promise((done, fail) => {
        stream.on('data', (chunk: Buffer) => {
          hash.update(chunk);
          size += chunk.length;
        });
        stream.on('end', () => {
          part[1] = { filename, mimeType, size, sha256: hash.digest('hex') };
          done();
        });
        stream.on('error', fail);
      }),
    );
  });
  return {
    write(chunk) {
      whole.write(chunk);
      if (!failed) parser.write(chunk);
    },
    async end() {
      if (!failed) parser.end();
      await closed;
      if (failed) return whole.end();
      await Promise.all(files);
      return { readAs: 'multipart', body: byName(parts) };
    },
  };
}

/** Entries by name: one value as it is, several as an array in order. */
function byName(entries: Iterable<[string, unknown]>): Record<string, unknown> {
  const values = new Map<string, unknown[]>();
  for (const [name, value] of entries) {
    const list = values.get(name);
    if (list) list.push(value);
    else values.set(name, [value]);
  }
  return Object.fromEntries([...values].map(([name, list]) => [name, list.length === 1 ? list[0] : list]));
}
