/**
 * The characters a terminal acts on rather than shows: C0 (ESC starts the
 * CSI, OSC and other sequences that clear the screen, recolour text, set
 * the window title or write the clipboard), DEL, C1 (U+009B is a CSI on its
 * own), and the line and paragraph separators some terminals and viewers
 * break lines on. Stored text is written by callers of the app, so none of
 * it may reach the terminal raw.
 */
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g;
/** What JSON already escapes in strings and never emits raw in its own layout. */
const UNESCAPED_BY_JSON = /[\u007f-\u009f\u2028\u2029]/g;
const SHORT: Record<string, string> = { '\b': '\\b', '\t': '\\t', '\n': '\\n', '\f': '\\f', '\r': '\\r' };

const escaped = (character: string) => SHORT[character] ?? `\\u${character.charCodeAt(0).toString(16).padStart(4, '0')}`;

/**
 * Stored text as one inert line for a terminal: each control character
 * written as JSON writes it (`\u001b`, `\n`), so that an escape sequence
 * shows as text and a stored newline cannot start a line of the CLI's own.
 * Everything else stays as stored, backslashes included: the exact text is
 * what `--json` is for.
 *
 * @example
 * terminalText('\u001b[2Jgone') // '\\u001b[2Jgone'
 */
export function terminalText(value: unknown): string {
  return String(value ?? '').replace(CONTROL, escaped);
}

/**
 * `value` as indented JSON whose text holds no control character a
 * terminal acts on: JSON.stringify escapes C0 in strings but leaves DEL and
 * C1 raw, which are escaped here too. Parsed, it is the same data.
 */
export function jsonText(value: unknown): string {
  return JSON.stringify(value, null, 2).replace(UNESCAPED_BY_JSON, escaped);
}
