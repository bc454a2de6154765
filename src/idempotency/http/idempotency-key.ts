/** What the `Idempotency-Key` header of a request holds. */
export type ParsedIdempotencyKey =
  | { kind: 'missing' }
  | { kind: 'malformed'; reason: string }
  | { kind: 'valid'; key: string };

export const MAX_KEY_LENGTH = 255;

const VISIBLE_ASCII = /^[\x21-\x7e]+$/;
const OPTIONAL_WHITESPACE = /^[ \t]+|[ \t]+$/g;

/**
 * Parses the values a request sent for the key header (one entry per header
 * line). The value is a bare token or an RFC 8941 sf-string (`"..."`), and the
 * key inside is 1 to 255 visible ASCII characters. A repeated header is
 * malformed: it is impossible to tell which key the client meant.
 */
export function parseIdempotencyKey(values: readonly string[]): ParsedIdempotencyKey {
  if (values.length === 0) return { kind: 'missing' };
  if (values.length > 1) return { kind: 'malformed', reason: 'the header is repeated' };
  // HTTP's optional whitespace is SP and HTAB only; trim() would also eat NBSP, BOM or line breaks.
  const raw = values[0].replace(OPTIONAL_WHITESPACE, '');
  const key = raw.startsWith('"') ? parseSfString(raw) : raw;
  if (key === undefined) return { kind: 'malformed', reason: 'the quoted value is not a valid RFC 8941 string' };
  if (key.length === 0) return { kind: 'malformed', reason: 'the key is empty' };
  if (key.length > MAX_KEY_LENGTH) return { kind: 'malformed', reason: `the key is longer than ${MAX_KEY_LENGTH} characters` };
  if (!VISIBLE_ASCII.test(key)) return { kind: 'malformed', reason: 'the key holds characters other than visible ASCII' };
  return { kind: 'valid', key };
}

/** RFC 8941 §4.2.5: a quoted string with `\"` and `\\` as its only escapes. */
function parseSfString(raw: string): string | undefined {
  let value = '';
  for (let i = 1; i < raw.length; i++) {
    const char = raw[i];
    if (char === '"') return i === raw.length - 1 ? value : undefined;
    if (char === '\\') {
      const escaped = raw[++i];
      if (escaped !== '"' && escaped !== '\\') return undefined;
      value += escaped;
    } else if (char < ' ' || char > '~') {
      return undefined;
    } else {
      value += char;
    }
  }
  return undefined;
}

/** Every value of a header, one per header line (Express and Fastify merge repeated ones). */
export function headerValues(request: { raw?: { rawHeaders: string[] }; rawHeaders?: string[] }, name: string): string[] {
  const raw = request.raw?.rawHeaders ?? request.rawHeaders ?? [];
  const wanted = name.toLowerCase();
  const values: string[] = [];
  // The length first: most header names differ in it, and lower-casing each would copy it.
  for (let i = 0; i < raw.length; i += 2) if (raw[i].length === wanted.length && raw[i].toLowerCase() === wanted) values.push(raw[i + 1]);
  return values;
}
