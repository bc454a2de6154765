import busboy from 'busboy';
import { isUtf8 } from 'node:buffer';
import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { IdempotencyBodyNotFingerprintedException, IdempotencyBodyTooLargeException } from '../errors/idempotency.exceptions.js';

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
 * (413 beyond).
 */
export function readUnreadBody(request: { raw?: IncomingMessage } & Partial<IncomingMessage>, limit: number): Promise<Buffer> {
  const raw = request.raw ?? (request as IncomingMessage);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const push = raw.push;
    const settle = (error?: Error) => {
      if (settled) return;
      settled = true;
      delete (raw as Partial<IncomingMessage>).push; // the prototype's again
      raw.off('close', onClose);
      if (error) reject(error);
      else resolve(Buffer.concat(chunks, size));
    };
    const take = (chunk: Buffer | string) => {
      const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      chunks.push(bytes);
      size += bytes.length;
      if (size > limit) settle(new IdempotencyBodyTooLargeException(limit));
    };
    const onClose = () => settle(raw.complete ? undefined : new Error('The client closed the request before its body arrived'));
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

/**
 * The body as the fingerprint sees it, by its media type, so that a retry of
 * the same request fingerprints the same:
 * - `multipart/form-data`: the fields by name, each file as its name, type,
 *   size and SHA-256 (the boundary, which clients draw anew per request, does not count);
 * - JSON: the parsed value; `application/x-www-form-urlencoded`: the fields by name;
 * - `text/*`: the text;
 * - anything else, and any of these that is not UTF-8: its size and SHA-256.
 * A field or file name given more than once keeps every value, in order.
 */
export async function bodyValueOf(bytes: Buffer, headers: IncomingHttpHeaders): Promise<unknown> {
  const type = (headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
  if (type === 'multipart/form-data') return multipartValueOf(bytes, headers);
  // Text that is not UTF-8 (another charset, or broken) goes by its bytes: decoded, every bad sequence
  // would read as U+FFFD, and two different bodies as one.
  const text = isUtf8(bytes) ? bytes.toString('utf8') : undefined;
  if (text === undefined) return digestOf(bytes);
  if (type === 'application/json' || type.endsWith('+json')) {
    try {
      return JSON.parse(text);
    } catch {
      return digestOf(bytes);
    }
  }
  if (type === 'application/x-www-form-urlencoded') return byName(new URLSearchParams(text));
  if (type.startsWith('text/')) return text;
  return digestOf(bytes);
}

function multipartValueOf(bytes: Buffer, headers: IncomingHttpHeaders): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const parts: Array<[string, unknown]> = [];
    const files: Array<Promise<void>> = [];
    const parser = busboy({ headers, defParamCharset: 'utf8' });
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
    parser.on('close', () => Promise.all(files).then(() => resolve(byName(parts)), reject));
    // A body busboy cannot read as multipart is fingerprinted by its bytes: a retry sends the same ones.
    parser.on('error', () => resolve(digestOf(bytes)));
    parser.end(bytes);
  });
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

function digestOf(bytes: Buffer): { size: number; sha256: string } {
  return { size: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') };
}
