/** What PostgreSQL cannot store in a string: the NUL character, or half of a UTF-16 surrogate pair. */
type Unstorable = 'nul' | 'lone-surrogate';

const FIX: Record<Unstorable, string> = {
  nul:
    'a NUL character (\\u0000), which PostgreSQL stores in neither jsonb (SQLSTATE 22P05) nor text. ' +
    'Remove it, or encode the value (base64, say), before adding the event.',
  'lone-surrogate':
    'a lone UTF-16 surrogate (half of a pair, as a string cut in the middle of an emoji leaves), which is not Unicode and PostgreSQL cannot store. ' +
    'Cut strings at code points (Array.from(text)), or make them whole with String.prototype.toWellFormed(), before adding the event.',
};

/**
 * `Outbox.add()` was given an event PostgreSQL cannot store. It is thrown
 * before any statement is sent, so the current transaction goes on: a
 * handler may catch it and carry on with its other writes.
 */
export class OutboxEventUnstorableError extends Error {
  constructor(
    /** Where the value is: `type`, `key`, or a path such as `payload.lines[1]` or `headers.trace`. */
    readonly field: string,
    problem: Unstorable,
    /** Whether a member name at `field` holds it, rather than a value. */
    inName = false,
  ) {
    // Neither the value nor the name is quoted: an answer that carries this message must stay storable itself.
    super(`outbox.add() cannot store the event: ${inName ? `a member name in ${field}` : field} holds ${FIX[problem]} Nothing was written, and the transaction goes on.`);
    this.name = 'OutboxEventUnstorableError';
  }
}

/** Pairs are whole: a high surrogate without a low one after it, or a low one without a high one before it. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * In `JSON.stringify`'s output, the escapes of a NUL and of a lone surrogate
 * (it writes whole pairs as they are, and escapes in lower case), where the
 * backslash is not itself escaped: an even run of backslashes before it.
 */
const UNSTORABLE_ESCAPE = /(?<!\\)(?:\\\\)*\\u(?:0000|d[89a-f][0-9a-f]{2})/;

function problemOf(text: string): Unstorable | undefined {
  if (text.includes('\u0000')) return 'nul';
  return LONE_SURROGATE.test(text) ? 'lone-surrogate' : undefined;
}

/** `text`, for a text column; refused with the field's name when PostgreSQL cannot store it. */
export function storableText(text: string, field: string): string {
  const problem = problemOf(text);
  if (problem) throw new OutboxEventUnstorableError(field, problem);
  return text;
}

/**
 * `value` as JSON, for a jsonb column; refused with the path of the first
 * string (a value or a member name) PostgreSQL cannot store. The JSON text is
 * scanned once; only a hit is parsed again, to name the path.
 */
export function storableJson(value: unknown, field: string): string {
  const json = JSON.stringify(value);
  if (json !== undefined && UNSTORABLE_ESCAPE.test(json)) throwAtFirst(JSON.parse(json), field);
  return json;
}

/** Walks a parsed JSON value, members in order, and throws at the first unstorable string. */
function throwAtFirst(value: unknown, path: string): void {
  if (typeof value === 'string') {
    const problem = problemOf(value);
    if (problem) throw new OutboxEventUnstorableError(path, problem);
    return;
  }
  if (Array.isArray(value)) {
    value.forEach((item, index) => throwAtFirst(item, `${path}[${index}]`));
    return;
  }
  if (value === null || typeof value !== 'object') return;
  for (const [name, member] of Object.entries(value)) {
    const problem = problemOf(name);
    if (problem) throw new OutboxEventUnstorableError(path, problem, true);
    throwAtFirst(member, /^[A-Za-z_$][\w$]*$/.test(name) ? `${path}.${name}` : `${path}[${JSON.stringify(name)}]`);
  }
}
