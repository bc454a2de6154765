import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { bodyStateOf, bodyValueOf, readUnreadBody } from './request-body.js';

const multipart = (boundary: string, parts: Array<{ name: string; value: string; filename?: string; type?: string }>) =>
  Buffer.from(
    parts
      .map(
        ({ name, value, filename, type }) =>
          `--${boundary}\r\nContent-Disposition: form-data; name="${name}"${filename ? `; filename="${filename}"` : ''}\r\n${type ? `Content-Type: ${type}\r\n` : ''}\r\n${value}\r\n`,
      )
      .join('') + `--${boundary}--\r\n`,
  );
const headersFor = (type: string) => ({ 'content-type': type });

describe('bodyValueOf: what the fingerprint sees of a body no parser read', () => {
  it.each([
    ['JSON, parsed', 'application/json', '{"b":1,"a":[true,null]}', { b: 1, a: [true, null] }],
    ['a +json type, parsed', 'application/merge-patch+json; charset=utf-8', '{"a":1}', { a: 1 }],
    ['a form, by field name, repeats in order', 'application/x-www-form-urlencoded', 'amount=10&tag=a&tag=b', { amount: '10', tag: ['a', 'b'] }],
    ['text, as text', 'text/plain; charset=utf-8', 'pay 10 to alice', 'pay 10 to alice'],
  ])('%s', async (_case, type, body, expected) => {
    expect(await bodyValueOf(Buffer.from(body), headersFor(type))).toEqual(expected);
  });

  it('gives JSON that does not parse, and binary, as their size and SHA-256', async () => {
    expect(await bodyValueOf(Buffer.from('{"a":'), headersFor('application/json'))).toEqual({ size: 5, sha256: expect.stringMatching(/^[0-9a-f]{64}$/) });
    const bytes = Buffer.from([0, 1, 2, 255]);
    const value = await bodyValueOf(bytes, headersFor('application/octet-stream'));
    expect(value).toEqual({ size: 4, sha256: createHash('sha256').update(bytes).digest('hex') });
    expect(await bodyValueOf(Buffer.from([0, 1, 2, 254]), headersFor('application/octet-stream'))).not.toEqual(value);
  });

  it('gives text, JSON and forms that are not UTF-8 by their bytes, so that two such bodies never read alike', async () => {
    // "100 €" and "100 £" in windows-1252, "café" and "cafè" in latin-1: decoded as UTF-8, each pair read as one text.
    for (const [type, one, other] of [
      ['text/csv; charset=windows-1252', [0x31, 0x30, 0x30, 0x20, 0x80], [0x31, 0x30, 0x30, 0x20, 0xa3]],
      ['text/plain; charset=iso-8859-1', [0x63, 0x61, 0x66, 0xe9], [0x63, 0x61, 0x66, 0xe8]],
      ['application/json', [0x22, 0xff, 0x22], [0x22, 0xfe, 0x22]],
      ['application/x-www-form-urlencoded', [0x61, 0x3d, 0xff], [0x61, 0x3d, 0xfe]],
    ] as const) {
      const value = await bodyValueOf(Buffer.from(one), headersFor(type));
      expect({ type, value }).toEqual({ type, value: { size: one.length, sha256: createHash('sha256').update(Buffer.from(one)).digest('hex') } });
      expect(await bodyValueOf(Buffer.from(other), headersFor(type))).not.toEqual(value);
    }
    // U+FFFD written out is UTF-8 text, and stays text: not the bytes it would replace.
    expect(await bodyValueOf(Buffer.from('a\uFFFD'), headersFor('text/plain'))).toBe('a\uFFFD');
  });

  it('reads multipart by its parts: the boundary does not count, a field or a file does', async () => {
    const parts = [
      { name: 'amount', value: '10' },
      { name: 'file', value: 'invoice A', filename: 'invoice.txt', type: 'text/plain' },
    ];
    const one = await bodyValueOf(multipart('one', parts), headersFor('multipart/form-data; boundary=one'));
    const other = await bodyValueOf(multipart('other-boundary', parts), headersFor('multipart/form-data; boundary=other-boundary'));
    expect(one).toEqual({ amount: '10', file: { filename: 'invoice.txt', mimeType: 'text/plain', size: 9, sha256: expect.stringMatching(/^[0-9a-f]{64}$/) } });
    expect(other).toEqual(one);
    const changed = await bodyValueOf(multipart('one', [parts[0], { ...parts[1], value: 'invoice B' }]), headersFor('multipart/form-data; boundary=one'));
    expect(changed).not.toEqual(one);
  });
});

describe('readUnreadBody: reads a body for the fingerprint and leaves it whole in the stream', () => {
  /** A server whose handler gives the request to `handle`, and a client that sends `body` to it. */
  const exchange = async (body: Buffer, handle: (incoming: IncomingMessage) => Promise<unknown>): Promise<unknown> => {
    let result: Promise<unknown> | undefined;
    const server = createServer((incoming, response) => {
      result = handle(incoming);
      result.finally(() => response.end()).catch(() => undefined);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      await new Promise<void>((resolve, reject) => {
        const sent = request({ port: (server.address() as AddressInfo).port, host: '127.0.0.1', method: 'POST', headers: { 'content-type': 'application/octet-stream', 'content-length': body.length } }, (response) => {
          response.resume();
          response.on('end', resolve);
        });
        sent.on('error', reject);
        sent.end(body);
      });
      return await result;
    } finally {
      server.close();
    }
  };
  const collect = async (incoming: IncomingMessage) => {
    const chunks: Buffer[] = [];
    for await (const chunk of incoming) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  };

  it.each([
    ['a small body', 10],
    ['a body far over the stream’s high-water mark', 3 * 1024 * 1024],
  ])('%s', async (_case, size) => {
    const body = Buffer.from(Array.from({ length: size }, (_, i) => i % 251));
    const [read, handlerRead] = (await exchange(body, async (incoming) => {
      expect(bodyStateOf(incoming)).toBe('unread');
      const bytes = await readUnreadBody(incoming, 16 * 1024 * 1024);
      return [bytes, await collect(incoming)];
    })) as [Buffer, Buffer];
    expect(read.equals(body)).toBe(true);
    expect(handlerRead.equals(body)).toBe(true);
  });

  it('refuses a body over the limit', async () => {
    const outcome = await exchange(Buffer.alloc(64 * 1024, 1), (incoming) => readUnreadBody(incoming, 1024).then(() => 'read', (error: Error) => error.constructor.name));
    expect(outcome).toBe('IdempotencyBodyTooLargeException');
  });
});
