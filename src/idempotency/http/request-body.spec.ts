import fc from 'fast-check';
import { createHash } from 'node:crypto';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { canonicalRequest, type ReadBody } from '../fingerprint/request-fingerprint.js';
import { appBodyLimitOf, bodyReaderFor, bodyStateOf, readUnreadBody } from './request-body.js';

interface Part {
  name: string;
  value: string;
  filename?: string;
  type?: string;
}
const multipart = (boundary: string, parts: Part[]) =>
  Buffer.from(
    parts
      .map(
        ({ name, value, filename, type }) =>
          `--${boundary}\r\nContent-Disposition: form-data; name="${name}"${filename ? `; filename="${filename}"` : ''}\r\n${type ? `Content-Type: ${type}\r\n` : ''}\r\n${value}\r\n`,
      )
      .join('') + `--${boundary}--\r\n`,
  );
const sha256 = (bytes: Buffer | string) => createHash('sha256').update(bytes).digest('hex');

/** What a server's handler got: the body as the fingerprint reads it, and the bytes the handler read after it; or the error's class. */
type Exchanged = { read: ReadBody; handlerRead: Buffer } | { error: string };

let server: Server;
let limit = 16 * 1024 * 1024;
const results = new Map<string, Promise<Exchanged>>();

beforeAll(async () => {
  server = createServer((incoming, response) => {
    const result = (async (): Promise<Exchanged> => {
      expect(bodyStateOf(incoming)).toBe('unread');
      const read = await readUnreadBody(incoming, limit);
      const chunks: Buffer[] = [];
      for await (const chunk of incoming) chunks.push(chunk as Buffer);
      return { read, handlerRead: Buffer.concat(chunks) };
    })().catch((error: Error) => ({ error: error.constructor.name }));
    results.set(incoming.headers['x-exchange'] as string, result);
    result.finally(() => response.end()).catch(() => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

let exchanges = 0;
/** Sends `body` as `contentType` and answers what the server's handler got. */
async function exchange(contentType: string, body: Buffer): Promise<Exchanged> {
  const id = String(++exchanges);
  await new Promise<void>((resolve, reject) => {
    const headers = { 'content-type': contentType, 'content-length': body.length, 'x-exchange': id };
    const sent = request({ port: (server.address() as AddressInfo).port, host: '127.0.0.1', method: 'POST', headers }, (response) => {
      response.resume();
      response.on('end', resolve);
    });
    sent.on('error', reject);
    sent.end(body);
  });
  return results.get(id)!;
}
const readOf = async (contentType: string, body: Buffer | string) => {
  const exchanged = await exchange(contentType, Buffer.from(body));
  if ('error' in exchanged) throw new Error(exchanged.error);
  return exchanged.read;
};

describe('readUnreadBody: what the fingerprint sees of a body no parser read', () => {
  afterEach(() => {
    limit = 16 * 1024 * 1024;
  });

  it.each([
    ['JSON', 'application/json', '{"b":1,"a":[true,null]}'],
    ['a +json type', 'application/vnd.x+json; charset=utf-8', '{"a":1}'],
    ['a form', 'application/x-www-form-urlencoded', 'amount=10&tag=a&tag=b'],
    ['text, with its charset', 'text/plain; charset=iso-8859-1', 'caf\xe9'],
    ['binary', 'application/octet-stream', '\x00\x01\xff'],
  ])('reads %s as its bytes: its Content-Type as sent, size and SHA-256, never parsed', async (_case, type, text) => {
    const bytes = Buffer.from(text, 'latin1');
    expect(await readOf(type, bytes)).toEqual({ readAs: 'bytes', body: { contentType: type, size: bytes.length, sha256: sha256(bytes) } });
  });

  it('tells apart the same bytes sent in another charset', async () => {
    const bytes = Buffer.from([0x63, 0x61, 0x66, 0xe9]);
    expect(await readOf('text/plain; charset=iso-8859-1', bytes)).not.toEqual(await readOf('text/plain; charset=windows-1251', bytes));
  });

  it('reads multipart by its parts’ bytes: the boundary does not count, any other byte does', async () => {
    const parts = [
      { name: 'amount', value: '10' },
      { name: 'file', value: 'invoice A', filename: 'invoice.txt', type: 'text/plain' },
    ];
    const one = await readOf('multipart/form-data; boundary=one', multipart('one', parts));
    expect(one).toEqual({ readAs: 'multipart', body: { contentType: 'multipart/form-data', stretches: 4, sha256: expect.stringMatching(/^[0-9a-f]{64}$/) } });
    expect(await readOf('multipart/form-data; boundary="other-boundary"', multipart('other-boundary', parts))).toEqual(one);
    for (const other of [
      [parts[0], { ...parts[1], value: 'invoice B' }],
      [parts[1], parts[0]], // the parts' order, which a parser's list of them keeps
      [parts[0], { ...parts[1], filename: 'r\xe9sum\xe9.pdf' }],
      [parts[0], { ...parts[1], filename: 'r\xe8sum\xe8.pdf' }],
      [parts[0], { ...parts[1], filename: 'a/invoice.txt' }], // preservePath keeps the folder
      [parts[0], { ...parts[1], type: 'text/plain\r\nContent-Transfer-Encoding: base64' }],
    ]) {
      const read = await readOf('multipart/form-data; boundary=one', Buffer.from(multipart('one', other).toString('latin1'), 'latin1'));
      expect(read).not.toEqual(one);
    }
  });

  it('reads a multipart field whole, however long', async () => {
    const field = (last: string) => multipart('b', [{ name: 'note', value: 'x'.repeat(1024 * 1024 + 10) + last }]);
    expect(await readOf('multipart/form-data; boundary=b', field('A'))).not.toEqual(await readOf('multipart/form-data; boundary=b', field('B')));
  });

  it('finds a delimiter cut between two chunks, whatever the chunks', () => {
    const parts = [
      { name: 'a', value: '1' },
      { name: 'b', value: '--cut-her' },
      { name: 'c', value: 'x\r\n--cut' },
    ];
    const whole = bodyReaderFor({ 'content-type': 'multipart/form-data; boundary=cut-here' });
    whole.write(multipart('cut-here', parts));
    const expected = whole.end();
    expect(expected.body).toMatchObject({ stretches: 5 });
    const body = multipart('cut-here', parts);
    for (const size of [1, 2, 3, 5, 7, 11, 13]) {
      const reader = bodyReaderFor({ 'content-type': 'multipart/form-data; boundary=cut-here' });
      for (let at = 0; at < body.length; at += size) reader.write(body.subarray(at, at + size));
      expect({ size, read: reader.end() }).toEqual({ size, read: expected });
    }
  });

  it('reads a multipart body with no closing delimiter, or two boundaries, by its bytes and never throws', async () => {
    const truncated = Buffer.from('--XyZ\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\nhello world');
    expect((await readOf('multipart/form-data; boundary=XyZ', truncated)).readAs).toBe('multipart');
    const twice = 'multipart/form-data; boundary=X; boundary=Y';
    expect(await readOf(twice, truncated)).toEqual({ readAs: 'bytes', body: { contentType: twice, size: truncated.length, sha256: sha256(truncated) } });
  });

  it('gives different requests different fingerprints, whatever the body type', async () => {
    const part = fc.record({ name: fc.string({ minLength: 1, maxLength: 6 }).filter((name) => !/["\r\n\\]/.test(name)), value: fc.string({ maxLength: 12 }).filter((value) => !value.includes('\r\n--')), file: fc.boolean() });
    const body = fc.oneof(
      fc.record({ type: fc.constantFrom('application/json', 'application/vnd.x+json', 'text/plain; charset=utf-8', 'text/plain; charset=latin1', 'application/octet-stream'), bytes: fc.uint8Array({ minLength: 1, maxLength: 24 }) }),
      fc.array(part, { maxLength: 3 }).map((parts) => ({ type: 'multipart/form-data; boundary=zz', bytes: multipart('zz', parts.map(({ name, value, file }) => ({ name, value, filename: file ? 'f.txt' : undefined }))) })),
    );
    const fingerprint = (read: ReadBody) => canonicalRequest('POST /upload', { params: {}, query: {}, body: read.body }, read.readAs);
    await fc.assert(
      fc.asyncProperty(body, body, async (one, other) => {
        const [a, b] = [await readOf(one.type, Buffer.from(one.bytes)), await readOf(other.type, Buffer.from(other.bytes))];
        const same = one.type === other.type && Buffer.compare(Buffer.from(one.bytes), Buffer.from(other.bytes)) === 0;
        if (!same) expect(fingerprint(a)).not.toBe(fingerprint(b));
        // The same request always reads the same.
        expect(fingerprint(await readOf(one.type, Buffer.from(one.bytes)))).toBe(fingerprint(a));
      }),
      { numRuns: 60 },
    );
  });

  it('never gives a body it read the fingerprint of a parsed body, whatever that holds', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.constantFrom<ReadBody['readAs']>('bytes', 'multipart'), (parsed, readAs) => {
        const digest = { contentType: 'application/octet-stream', size: 3, sha256: sha256('abc') };
        expect(canonicalRequest('POST /upload', { body: parsed })).not.toBe(canonicalRequest('POST /upload', { body: digest }, readAs));
        expect(canonicalRequest('POST /upload', { body: digest })).not.toBe(canonicalRequest('POST /upload', { body: digest }, readAs));
      }),
    );
  });
});

describe('readUnreadBody: leaves the body whole in the stream, and bounds it', () => {
  it.each([
    ['a small body', 10],
    ['a body far over the stream’s high-water mark', 3 * 1024 * 1024],
  ])('%s', async (_case, size) => {
    const body = Buffer.from(Array.from({ length: size }, (_, i) => i % 251));
    const exchanged = await exchange('application/octet-stream', body);
    expect('handlerRead' in exchanged && exchanged.handlerRead.equals(body)).toBe(true);
    expect('read' in exchanged && exchanged.read.body).toEqual({ contentType: 'application/octet-stream', size, sha256: sha256(body) });
  });

  it('refuses a body over the limit with 413', async () => {
    limit = 1024;
    expect(await exchange('application/octet-stream', Buffer.alloc(64 * 1024, 1))).toEqual({ error: 'IdempotencyBodyTooLargeException' });
  });

  it('answers a body the client stopped sending with a 400 of its own, not an error', async () => {
    const port = (server.address() as AddressInfo).port;
    const sent = request({ port, host: '127.0.0.1', method: 'POST', headers: { 'content-type': 'application/octet-stream', 'content-length': 1000, 'x-exchange': 'aborted' } });
    sent.on('error', () => undefined);
    sent.write(Buffer.alloc(10));
    await vi.waitFor(() => expect(results.has('aborted')).toBe(true));
    sent.destroy();
    expect(await results.get('aborted')).toEqual({ error: 'IdempotencyBodyIncompleteException' });
  });
});

describe('bodyStateOf: where a body stands when the route is reached', () => {
  const read = (fields: object) => ({ headers: { 'content-length': '10', 'content-type': 'application/x' }, readableDidRead: true, readableEnded: true, ...fields }) as never;

  it.each([
    ['no body on the wire', { headers: {} }, 'parsed'],
    ['a body nothing read', { headers: { 'content-length': '10' }, readableDidRead: false, readableEnded: false }, 'unread'],
    ['a parser’s data', read({ body: { a: 1 } }), 'parsed'],
    ['express.raw()’s Buffer', read({ body: Buffer.from('abc') }), 'bytes'],
    ['a rawBody a middleware kept, and no body', read({ rawBody: Buffer.from('abc') }), 'bytes'],
    ['a rawBody beside the {} Express 4’s parsers leave on a body they skip', read({ body: {}, rawBody: Buffer.from('abc') }), 'bytes'],
    ['{} parsed from a body of its own', read({ body: {}, rawBody: Buffer.alloc(0) }), 'parsed'],
    ['files a parser outside @Idempotent() took', read({ body: { a: '1' }, file: { size: 3 } }), 'files'],
    ['@fastify/multipart’s methods, which took nothing', read({ body: 'text', file: () => undefined, files: () => undefined }), 'parsed'],
    ['nothing left to read', read({}), 'hidden'],
  ])('%s', (_case, request, state) => {
    expect(bodyStateOf(request as never)).toBe(state);
  });
});

describe('appBodyLimitOf: the bound where none is named', () => {
  it('is Fastify’s bodyLimit on Fastify, else 1 MiB', () => {
    expect(appBodyLimitOf({ initialConfig: { bodyLimit: 16 * 1024 } })).toBe(16 * 1024);
    expect(appBodyLimitOf(function expressApp() {})).toBe(1024 * 1024);
    expect(appBodyLimitOf(undefined)).toBe(1024 * 1024);
  });
});
