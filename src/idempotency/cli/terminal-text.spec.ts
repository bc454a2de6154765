import { jsonText, terminalText } from './terminal-text.js';

/** What a terminal would act on: any C0 but the newlines the CLI lays out with, DEL, C1, U+2028 and U+2029. */
const ACTIVE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029]/;

describe('terminalText', () => {
  it.each([
    ['a screen clear', '\u001b[2Jgone', '\\u001b[2Jgone'],
    ['colours', '\u001b[31mred\u001b[0m', '\\u001b[31mred\\u001b[0m'],
    ['an OSC 52 clipboard write ended by BEL', '\u001b]52;c;cHduZWQ=\u0007', '\\u001b]52;c;cHduZWQ=\\u0007'],
    ['an OSC ended by ST', '\u001b]0;title\u001b\\', '\\u001b]0;title\\u001b\\'],
    ['a C1 CSI and NEL', '\u009b2J\u0085', '\\u009b2J\\u0085'],
    ['DEL and backspace', 'paid\u0008\u0008\u0008\u0008due\u007f', 'paid\\b\\b\\b\\bdue\\u007f'],
    ['newlines, tabs and returns', 'one\ntwo\r\n\tthree', 'one\\ntwo\\r\\n\\tthree'],
    ['the line and paragraph separators', 'a\u2028b\u2029c', 'a\\u2028b\\u2029c'],
    ['text as stored', 'C:\\orders\\é 日本 ✓ 🙂 "quoted"', 'C:\\orders\\é 日本 ✓ 🙂 "quoted"'],
  ])('escapes %s', (_, stored, shown) => {
    expect(terminalText(stored)).toBe(shown);
    expect(terminalText(stored)).not.toMatch(ACTIVE);
  });

  it('shows nothing for a missing value, and numbers as they print', () => {
    expect([terminalText(null), terminalText(undefined), terminalText(201)]).toEqual(['', '', '201']);
  });
});

describe('jsonText', () => {
  const stored = { reason: '\u001b[2J\u009b31m\u007f\u0085\u2028x\ny', headers: { 'x-note': '\u009b' } };

  it('is the same data once parsed, with nothing a terminal acts on but its own line breaks', () => {
    expect(JSON.parse(jsonText(stored))).toEqual(stored);
    expect(jsonText(stored)).not.toMatch(ACTIVE);
    expect(jsonText(stored)).toContain('"\\u001b[2J\\u009b31m\\u007f\\u0085\\u2028x\\ny"');
  });
});
