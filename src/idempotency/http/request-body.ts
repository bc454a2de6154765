import { createHash, webcrypto } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { ReadBody } from '../fingerprint/request-fingerprint.js';
import {
  IdempotencyBodyIncompleteException,
  IdempotencyBodyNotFingerprintedException,
  IdempotencyBodyTooLargeException,
  IdempotencyConfigurationError,
} from '../errors/idempotency.exceptions.js';

/**
 * Where a request's body stands when the module fingerprints it, before the
 * route's handler and the interceptors bound inside `@Idempotent()` run:
 * - `parsed`: a body parser read it into data (JSON, forms, Fastify's text), or there is none;
 * - `bytes`: a parser left it as bytes: `express.raw()`'s Buffer, or a
 *   `rawBody` alone (a webhook's signature check), fingerprinted as the bytes;
 * - `unread`: nothing has read it yet (a multipart upload that `FileInterceptor`
 *   will parse, text on Express without a text parser, binary);
 * - `files`: a multipart parser outside `@Idempotent()` took its files
 *   (`request.file`, `request.files`), which no fingerprint of `body` sees;
 * - `hidden`: something read it but left no `body` (or `rawBody`) to fingerprint.
 */
export type BodyState = 'parsed' | 'bytes' | 'unread' | 'files' | 'hidden';

interface BodyCarrier {
  body?: unknown;
  rawBody?: unknown;
  file?: unknown;
  files?: unknown;
  raw?: IncomingMessage;
}

export function bodyStateOf(request: BodyCarrier & Partial<IncomingMessage>): BodyState {
  const raw = request.raw ?? (request as IncomingMessage);
  const { headers } = raw;
  const length = headers['content-length'];
  if (headers['transfer-encoding'] === undefined && (length === undefined || length === '0')) return 'parsed';
  if (!raw.readableDidRead && !raw.readableEnded) return 'unread';
  // Multer's objects; @fastify/multipart's file() and files() are methods, and its fields stay in the stream.
  if (isObject(request.file) || isObject(request.files)) return 'files';
  const { body, rawBody } = request;
  if (body instanceof Uint8Array) return 'bytes';
  // Express 4's parsers leave `{}` on a body they skip: the bytes a middleware kept say more.
  if ((body === undefined || isEmptyObject(body)) && rawBody instanceof Uint8Array && rawBody.length > 0) return 'bytes';
  return body === undefined ? 'hidden' : 'parsed';
}

function isObject(value: unknown): boolean {
  return typeof value === 'object' && value !== null;
}

function isEmptyObject(value: unknown): boolean {
  return typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype && Object.keys(value).length === 0;
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

/** In the `files` state the files went by the fingerprint: the route is set up the wrong way round, which its author fixes. */
export function refuseFilesParsedOutside(operation: string): never {
  throw new IdempotencyConfigurationError(
    `${operation}: a multipart parser (FileInterceptor, FilesInterceptor) ran before @Idempotent(), so its files are on request.file(s), where ` +
      `the fingerprint does not see them, and two uploads with other files would read as one. Put @UseInterceptors(FileInterceptor(…)) above ` +
      `@Idempotent() (decorators apply from the bottom up), so that the module reads the upload first.`,
  );
}

/** A body a parser left as bytes (the `bytes` state), as the fingerprint sees it; hashed off the event loop. */
export async function bytesBodyOf(request: BodyCarrier & Partial<IncomingMessage>): Promise<ReadBody> {
  const bytes = (request.body instanceof Uint8Array ? request.body : request.rawBody) as Uint8Array;
  const sha256 = Buffer.from(await webcrypto.subtle.digest('SHA-256', bytes)).toString('hex');
  const headers = (request.raw ?? (request as IncomingMessage)).headers;
  return { readAs: 'bytes', body: { contentType: (headers['content-type'] ?? '').trim(), size: bytes.length, sha256 } };
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
 * (413 beyond). Each chunk is hashed as it arrives, so no step holds the
 * event loop for the whole body.
 */
export function readUnreadBody(request: { raw?: IncomingMessage } & Partial<IncomingMessage>, limit: number): Promise<ReadBody> {
  const raw = request.raw ?? (request as IncomingMessage);
  const reader = bodyReaderFor(raw.headers);
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
      else resolve(reader.end());
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
export interface BodyReader {
  write(chunk: Buffer): void;
  end(): ReadBody;
}

/**
 * What the fingerprint sees of a body no parser read: its bytes, never
 * parsed or decoded, so that two bodies that differ in any byte differ.
 * - `multipart/form-data`: its parts' bytes, the headers of each part
 *   included, in order, but not the boundary between them, which clients
 *   draw anew per attempt;
 * - anything else: its `Content-Type` as sent (charset included), size and
 *   SHA-256. A parser of the app's would have read a body it takes, so the
 *   handler reads these bytes itself: the same bytes are the same request.
 */
export function bodyReaderFor(headers: IncomingHttpHeaders): BodyReader {
  const contentType = (headers['content-type'] ?? '').trim();
  const boundary = boundaryOf(contentType);
  return boundary === undefined ? bytesReader(contentType) : multipartReader(boundary);
}

const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
const PARAMETER = `\\s*;\\s*(${TOKEN})\\s*=\\s*(?:"([^"\\\\]*)"|(${TOKEN}))`;
const MULTIPART = new RegExp(`^multipart/form-data((?:${PARAMETER})*)\\s*(?:;\\s*)?$`, 'i');

/**
 * The boundary of a `multipart/form-data` Content-Type that names exactly
 * one, plainly (a token, or quoted without escapes); else undefined, and the
 * body is read as bytes, Content-Type and all. A header with two boundaries
 * could be split by one where a parser splits by the other.
 */
function boundaryOf(contentType: string): string | undefined {
  const parameters = MULTIPART.exec(contentType)?.[1];
  if (parameters === undefined) return undefined;
  const boundaries = [...parameters.matchAll(new RegExp(PARAMETER, 'g'))].filter(([, name]) => name.toLowerCase() === 'boundary');
  return boundaries.length === 1 ? (boundaries[0][2] ?? boundaries[0][3]) : undefined;
}

function bytesReader(contentType: string): BodyReader {
  const hash = createHash('sha256');
  let size = 0;
  return {
    write(chunk) {
      hash.update(chunk);
      size += chunk.length;
    },
    end: () => ({ readAs: 'bytes', body: { contentType, size, sha256: hash.digest('hex') } }),
  };
}

/**
 * Multipart by the bytes between its delimiters (`CRLF--boundary`, the first
 * one without its CRLF): each stretch hashed on its own, and the digest of
 * their digests in order. Two bodies give one digest only where they are
 * the same bytes around another boundary, which any multipart parser reads
 * as the same parts. Delimiters are found as the chunks arrive; a delimiter
 * cut between two chunks is found across them.
 */
function multipartReader(boundary: string): BodyReader {
  const delimiter = Buffer.from(`\r\n--${boundary}`);
  const all = createHash('sha256');
  let stretch = createHash('sha256');
  let stretches = 0;
  // The body's first delimiter has no CRLF before it: one is put there, so that every delimiter reads alike.
  let pending = Buffer.from('\r\n');
  const closeStretch = () => {
    all.update(stretch.digest());
    stretch = createHash('sha256');
    stretches += 1;
  };
  return {
    write(chunk) {
      const data = pending.length > 0 ? Buffer.concat([pending, chunk]) : chunk;
      let from = 0;
      for (let at = data.indexOf(delimiter, from); at !== -1; at = data.indexOf(delimiter, from)) {
        stretch.update(data.subarray(from, at));
        closeStretch();
        from = at + delimiter.length;
      }
      // What could be the start of a delimiter the next chunk completes waits for it.
      const safe = Math.max(from, data.length - (delimiter.length - 1));
      stretch.update(data.subarray(from, safe));
      pending = Buffer.from(data.subarray(safe));
    },
    end() {
      stretch.update(pending);
      closeStretch();
      return { readAs: 'multipart', body: { contentType: 'multipart/form-data', stretches, sha256: all.digest('hex') } };
    },
  };
}
