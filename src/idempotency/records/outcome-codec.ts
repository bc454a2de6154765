import { IdempotencyRecordUndecryptableException, UnsealError } from '../errors/idempotency.exceptions.js';
import type { EncodedOutcome, OutcomeColumns, OutcomeRecord, RecordId, RecordRow, StoredRecord } from './stored-record.js';
import type { OutcomeEncryption, ResolvedEncryptionOptions } from './outcome-encryption.js';
import type { RecordedOutcome } from '../outcome/recorded-outcome.js';

/** The payload's first byte: the body is null, or text. */
const NO_BODY = 0;
const TEXT_BODY = 1;

/**
 * Marks a plaintext record whose body column holds the body as a JSON string
 * literal (exact for any string, and still readable in the table): the body
 * has a NUL character, which PostgreSQL's text cannot hold.
 * No recorded header has this name: recorded names are lower-case, and
 * parentheses are not HTTP token characters. Node refuses it as a header
 * name, so a release that predates the marker answers such a record 500
 * rather than replay the literal.
 */
const BODY_ENCODING = '(Body)';
const JSON_STRING = 'json';

/**
 * How an outcome is stored in `response_headers` and `response_body`, and
 * read back: the one place that knows.
 *
 * - Without `encryption`: the headers as JSON, the body as the exact text
 *   sent; a body with a NUL character as a JSON string literal, marked in
 *   the headers (`BODY_ENCODING`). A sealed record (headers NULL) cannot be
 *   read and is never replayed: it answers 500.
 * - With `encryption`: headers and body sealed together in one envelope
 *   (`OutcomeEncryption`) in `response_body`, `response_headers` NULL. A
 *   plaintext record answers 500 unless `acceptPlaintext`.
 *
 * Sealed payload: a byte (0 no body, 1 text), the headers' JSON length as
 * 4 bytes big-endian, the headers' JSON, then the body's UTF-8 bytes. The
 * status, fingerprint and expiry stay in their columns, bound to the envelope
 * as authenticated data: the expiry only where `encode` is given it.
 */
export class OutcomeCodec {
  private readonly encryption: OutcomeEncryption | undefined;
  private readonly acceptPlaintext: boolean;

  constructor(options: ResolvedEncryptionOptions | undefined) {
    this.encryption = options?.sealer;
    this.acceptPlaintext = options?.acceptPlaintext ?? true;
  }

  /** The columns of `outcome`, recorded in `record`; sealed under `encryption`, bound to the record. */
  encode(record: OutcomeRecord, outcome: RecordedOutcome): EncodedOutcome {
    if (!this.encryption) return plaintextColumns(outcome);
    const headers = JSON.stringify(outcome.headers);
    const context = { id: record.id, status: outcome.status, fingerprint: record.fingerprint, expiresAt: record.expiresAt };
    const sealed = this.encryption.seal(context, payloadOf(headers, outcome.body));
    return { status: outcome.status, headers: null, body: sealed } as EncodedOutcome;
  }

  /** The outcome the columns hold; throws IdempotencyRecordUndecryptableException when it must not be replayed. */
  decode(id: RecordId, columns: OutcomeColumns): RecordedOutcome {
    const status = columns.response_status;
    if (columns.response_headers !== null) {
      if (!this.acceptPlaintext) throw new IdempotencyRecordUndecryptableException('plaintext-refused');
      return plaintextOutcome(status, columns.response_headers, columns.response_body);
    }
    if (!this.encryption) throw new IdempotencyRecordUndecryptableException('encryption-off');
    if (columns.response_body === null) throw new IdempotencyRecordUndecryptableException('malformed');
    let payload: Buffer;
    try {
      payload = this.encryption.open({ id, status, fingerprint: columns.fingerprint, expiresAt: columns.expires_at }, columns.response_body);
    } catch (error) {
      if (error instanceof UnsealError) throw new IdempotencyRecordUndecryptableException(error.reason);
      throw error;
    }
    return { status, ...outcomeOf(payload) };
  }

  /** The record of `id` as the flows use it: its outcome decoded, which throws for one that must not be replayed (see `decode`). */
  storedRecord(row: RecordRow, id: RecordId): StoredRecord {
    const outcome = hasOutcome(row) ? this.decode(id, row) : null;
    return { fingerprint: row.fingerprint, status: row.status, outcome, expiresAt: row.expires_at };
  }
}

/** Whether the row holds a recorded outcome (a finished record), without reading it. */
export function hasOutcome(row: RecordRow): row is RecordRow & OutcomeColumns {
  return row.status !== 'in_progress' && row.response_status !== null;
}

/** The body as sent; one with a NUL character as a JSON string literal, marked. */
function plaintextColumns({ status, headers, body }: RecordedOutcome): EncodedOutcome {
  if (body === null || !body.includes('\u0000')) return { status, headers: JSON.stringify(headers), body } as EncodedOutcome;
  return { status, headers: JSON.stringify({ ...headers, [BODY_ENCODING]: JSON_STRING }), body: JSON.stringify(body) } as EncodedOutcome;
}

/** The outcome of plaintext columns: a marked body read back from its literal, any other as stored. */
function plaintextOutcome(status: number, headers: Record<string, string>, body: string | null): RecordedOutcome {
  if (!Object.hasOwn(headers, BODY_ENCODING)) return { status, headers, body };
  const { [BODY_ENCODING]: encoding, ...sent } = headers;
  const text = encoding === JSON_STRING && body !== null ? stringLiteral(body) : undefined;
  if (text === undefined) throw new IdempotencyRecordUndecryptableException('malformed');
  return { status, headers: sent, body: text };
}

/** The string a JSON string literal spells; undefined for any other text. */
function stringLiteral(text: string): string | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'string' ? value : undefined;
  } catch {
    return undefined;
  }
}

function payloadOf(headersJson: string, body: string | null): Buffer {
  const headers = Buffer.from(headersJson, 'utf8');
  const prefix = Buffer.alloc(5);
  prefix.writeUInt8(body === null ? NO_BODY : TEXT_BODY, 0);
  prefix.writeUInt32BE(headers.length, 1);
  return body === null ? Buffer.concat([prefix, headers]) : Buffer.concat([prefix, headers, Buffer.from(body, 'utf8')]);
}

/** The headers and body of an authenticated payload; a payload this module did not write is `malformed`. */
function outcomeOf(payload: Buffer): Pick<RecordedOutcome, 'headers' | 'body'> {
  const fail = (): never => {
    throw new IdempotencyRecordUndecryptableException('malformed');
  };
  if (payload.length < 5) fail();
  const kind = payload.readUInt8(0);
  const headersEnd = 5 + payload.readUInt32BE(1);
  if ((kind !== NO_BODY && kind !== TEXT_BODY) || headersEnd > payload.length || (kind === NO_BODY && headersEnd !== payload.length)) fail();
  let headers: unknown;
  try {
    headers = JSON.parse(payload.toString('utf8', 5, headersEnd));
  } catch {
    fail();
  }
  if (typeof headers !== 'object' || headers === null || Array.isArray(headers)) fail();
  return { headers: headers as Record<string, string>, body: kind === NO_BODY ? null : payload.toString('utf8', headersEnd) };
}
