/**
 * A statement of a query as PostgreSQL's scanner reads it: its text, and
 * its words in order (keywords and names outside literals and comments).
 */
export interface ScannedStatement {
  text: string;
  /** Unquoted words as written; a quoted name as `"name` (its doubled quotes undone). */
  words: string[];
}

const SEMICOLON = 0x3b;
const QUOTE = 0x27;
const DOUBLE_QUOTE = 0x22;
const DOLLAR = 0x24;
const BACKSLASH = 0x5c;

/** `[A-Za-z_]` and every character past ASCII: what starts a name (scan.l's `ident_start`). */
const startsName = (code: number) => (code >= 0x61 && code <= 0x7a) || (code >= 0x41 && code <= 0x5a) || code === 0x5f || code >= 0x80;
const isDigit = (code: number) => code >= 0x30 && code <= 0x39;
/** What goes on a name: `ident_cont`, which takes `$`. */
const continuesName = (code: number) => startsName(code) || isDigit(code) || code === DOLLAR;
/** What goes on a dollar quote's tag: `dolq_cont`, which does not. */
const continuesTag = (code: number) => startsName(code) || isDigit(code);

/**
 * Splits `sql` into its statements at the semicolons PostgreSQL's scanner
 * (src/backend/parser/scan.l) reads as such, and lists each one's words.
 *
 * It follows the scanner where a mistake would hide a statement, or its
 * first words: `--` comments end at a line feed or a carriage return; block
 * comments nest; `E'…'` strings take backslash escapes, and so do plain
 * `'…'` strings when `backslashEscapes` (`standard_conforming_strings`
 * off); `B'…'` and `X'…'` end at their first quote; `$` goes on a name
 * (`a$$` is one) and opens a dollar quote only where a token starts; a
 * number ends where a name may start (`1a$$` is `1` then `a$$`).
 */
export function scanStatements(sql: string, backslashEscapes: boolean): ScannedStatement[] {
  const statements: ScannedStatement[] = [];
  let words: string[] = [];
  let start = 0;
  const end = (at: number) => {
    const text = sql.slice(start, at);
    if (words.length > 0 || text.trim() !== '') statements.push({ text, words });
    words = [];
    start = at + 1;
  };
  let at = 0;
  while (at < sql.length) {
    const code = sql.charCodeAt(at);
    const next = sql.charCodeAt(at + 1);
    if (code === 0x2d && next === 0x2d) at = lineCommentEnd(sql, at + 2);
    else if (code === 0x2f && next === 0x2a) at = blockCommentEnd(sql, at + 2);
    else if (code === QUOTE) at = literalEnd(sql, at + 1, backslashEscapes);
    else if (code === DOUBLE_QUOTE) {
      const close = quotedNameEnd(sql, at + 1);
      words.push(`"${sql.slice(at + 1, close - 1).replaceAll('""', '"')}`);
      at = close;
    } else if (code === DOLLAR) at = dollarEnd(sql, at);
    else if (code === SEMICOLON) {
      end(at);
      at++;
    } else if (isDigit(code)) at = numberEnd(sql, at);
    else if (startsName(code)) at = wordEnd(sql, at, words, backslashEscapes);
    else at++;
  }
  end(sql.length);
  return statements;
}

/** The first word of `sql`, after whitespace and comments; undefined where a statement starts otherwise. */
export function firstWord(sql: string): string | undefined {
  let at = 0;
  for (;;) {
    const code = sql.charCodeAt(at);
    const next = sql.charCodeAt(at + 1);
    if (code === 0x20 || (code >= 0x09 && code <= 0x0d)) at++;
    else if (code === 0x2d && next === 0x2d) at = lineCommentEnd(sql, at + 2);
    else if (code === 0x2f && next === 0x2a) at = blockCommentEnd(sql, at + 2);
    else break;
  }
  if (!startsName(sql.charCodeAt(at))) return undefined;
  let end = at + 1;
  while (end < sql.length && continuesName(sql.charCodeAt(end))) end++;
  return sql.slice(at, end);
}

/** A word, or the prefix of a literal (`E'…'`, `U&'…'`, `U&"…"`): the index after it. */
function wordEnd(sql: string, from: number, words: string[], backslashEscapes: boolean): number {
  let at = from + 1;
  while (at < sql.length && continuesName(sql.charCodeAt(at))) at++;
  if (at - from === 1) {
    const prefix = asciiUpperCase(sql[from]);
    const next = sql.charCodeAt(at);
    if (next === QUOTE) {
      if (prefix === 'E') return literalEnd(sql, at + 1, true);
      if (prefix === 'N') return literalEnd(sql, at + 1, backslashEscapes);
      if (prefix === 'B' || prefix === 'X') return bitStringEnd(sql, at + 1);
    }
    if (prefix === 'U' && next === 0x26) {
      const quote = sql.charCodeAt(at + 1);
      if (quote === QUOTE) return literalEnd(sql, at + 2, false);
      if (quote === DOUBLE_QUOTE) {
        const close = quotedNameEnd(sql, at + 2);
        words.push(`"${sql.slice(at + 2, close - 1)}`);
        return close;
      }
    }
  }
  words.push(sql.slice(from, at));
  return at;
}

function lineCommentEnd(sql: string, from: number): number {
  let at = from;
  while (at < sql.length && sql.charCodeAt(at) !== 0x0a && sql.charCodeAt(at) !== 0x0d) at++;
  return at;
}

/** The index after a block comment opened before `from`; comments nest. */
function blockCommentEnd(sql: string, from: number): number {
  let depth = 1;
  let at = from;
  while (at < sql.length) {
    if (sql.charCodeAt(at) === 0x2f && sql.charCodeAt(at + 1) === 0x2a) {
      depth++;
      at += 2;
    } else if (sql.charCodeAt(at) === 0x2a && sql.charCodeAt(at + 1) === 0x2f) {
      at += 2;
      if (--depth === 0) return at;
    } else at++;
  }
  return at;
}

/**
 * The index after a `'…'` literal opened before `from`: a doubled quote
 * stays inside, and with `backslashEscapes` so does an escaped one. A quote
 * after whitespace holding a line break (comments may come between) goes on
 * with the same literal, of the same kind (scan.l's `quotecontinue`).
 */
function literalEnd(sql: string, from: number, backslashEscapes: boolean): number {
  let at = from;
  while (at < sql.length) {
    const code = sql.charCodeAt(at);
    if (backslashEscapes && code === BACKSLASH) at += 2;
    else if (code === QUOTE && sql.charCodeAt(at + 1) === QUOTE) at += 2;
    else if (code === QUOTE) {
      const continued = continuation(sql, at + 1);
      if (continued === undefined) return at + 1;
      at = continued;
    } else at++;
  }
  return at;
}

/** The index after a bit string's digits (`B'…'`, `X'…'`), which end at a quote, unless continued (see `literalEnd`). */
function bitStringEnd(sql: string, from: number): number {
  for (let at = from; at < sql.length; at++) {
    if (sql.charCodeAt(at) !== QUOTE) continue;
    const continued = continuation(sql, at + 1);
    if (continued === undefined) return at + 1;
    at = continued - 1;
  }
  return sql.length;
}

/** Where a literal closed before `from` goes on: the index after the quote that continues it, if whitespace with a line break leads to one. */
function continuation(sql: string, from: number): number | undefined {
  let at = from;
  let lineBreak = false;
  for (;;) {
    const code = sql.charCodeAt(at);
    if (code === 0x0a || code === 0x0d) {
      lineBreak = true;
      at++;
    } else if (code === 0x20 || code === 0x09 || code === 0x0c) at++;
    else if (lineBreak && code === 0x2d && sql.charCodeAt(at + 1) === 0x2d) at = lineCommentEnd(sql, at + 2);
    else break;
  }
  return lineBreak && sql.charCodeAt(at) === QUOTE ? at + 1 : undefined;
}

/** The index after a `"…"` name opened before `from`. */
function quotedNameEnd(sql: string, from: number): number {
  let at = from;
  while (at < sql.length) {
    if (sql.charCodeAt(at) === DOUBLE_QUOTE && sql.charCodeAt(at + 1) === DOUBLE_QUOTE) at += 2;
    else if (sql.charCodeAt(at) === DOUBLE_QUOTE) return at + 1;
    else at++;
  }
  return at;
}

/** The index after what starts with `$` at `open`: a parameter (`$1`), a dollar-quoted string (`$$…$$`, `$tag$…$tag$`), or the `$` alone. */
function dollarEnd(sql: string, open: number): number {
  let at = open + 1;
  if (isDigit(sql.charCodeAt(at))) {
    while (isDigit(sql.charCodeAt(at))) at++;
    return at;
  }
  if (startsName(sql.charCodeAt(at))) while (continuesTag(sql.charCodeAt(at))) at++;
  if (sql.charCodeAt(at) !== DOLLAR) return open + 1;
  const delimiter = sql.slice(open, at + 1);
  const close = sql.indexOf(delimiter, at + 1);
  return close === -1 ? sql.length : close + delimiter.length;
}

/** The index after a number: digits (with `_`), a fraction, an exponent; a letter after them starts a word. */
function numberEnd(sql: string, from: number): number {
  let at = from;
  const digits = () => {
    while (isDigit(sql.charCodeAt(at)) || sql.charCodeAt(at) === 0x5f) at++;
  };
  digits();
  if (sql.charCodeAt(at) === 0x2e && sql.charCodeAt(at + 1) !== 0x2e) {
    at++;
    digits();
  }
  const exponent = sql.charCodeAt(at);
  if (exponent === 0x65 || exponent === 0x45) {
    const sign = sql.charCodeAt(at + 1) === 0x2b || sql.charCodeAt(at + 1) === 0x2d ? 1 : 0;
    if (isDigit(sql.charCodeAt(at + 1 + sign))) {
      at += 1 + sign;
      digits();
    }
  }
  return at;
}

/** PostgreSQL folds only ASCII letters of a keyword (`commıt` is none): JavaScript's toUpperCase folds others too. */
export function asciiUpperCase(word: string): string {
  return word.replace(/[a-z]+/g, (letters) => letters.toUpperCase());
}
