import { OutboxEventUnstorableError, storableJson, storableText } from './storable-event.js';

/** What `check` threw: the refusal's field and message, or undefined when it passed. */
function refusal(check: () => unknown): { field: string; message: string } | undefined {
  try {
    check();
    return undefined;
  } catch (error) {
    if (!(error instanceof OutboxEventUnstorableError)) throw error;
    return { field: error.field, message: error.message };
  }
}

describe('what the outbox can store', () => {
  it.each([
    ['plain JSON', { note: 'fine', n: [1, null, true] }],
    ['a whole surrogate pair (an emoji)', { note: 'ok \ud83d\ude00' }],
    ['the text of an escape, backslash and all', { note: '\\u0000 and \\ud800' }],
    ['an escaped backslash before a u', { note: '\\\\u0000' }],
    ['a Date, as JSON writes it', { at: new Date(0) }],
  ])('stores %s as JSON.stringify writes it', (_, payload) => {
    expect(storableJson(payload, 'payload')).toBe(JSON.stringify(payload));
  });

  it.each([
    ['a NUL in a value', { note: 'a\u0000b' }, 'payload.note', 'NUL character'],
    ['a NUL after a backslash', { note: '\\\u0000' }, 'payload.note', 'NUL character'],
    ['a high surrogate cut from its pair, in an array', { lines: ['whole', 'cut \ud83d'] }, 'payload.lines[1]', 'lone UTF-16 surrogate'],
    ['a low surrogate alone, deep down', { a: { b: [{ c: '\ude00 tail' }] } }, 'payload.a.b[0].c', 'lone UTF-16 surrogate'],
    ['a member name that is no identifier on the way', { 'x-y': { z: '\u0000' } }, 'payload["x-y"].z', 'NUL character'],
    ['a member name holding one', { meta: { 'bad\u0000name': 1 } }, 'payload.meta', 'a member name in payload.meta holds a NUL character'],
  ])('refuses %s, naming where it is', (_, payload, field, says) => {
    const refused = refusal(() => storableJson(payload, 'payload'));
    expect(refused?.field).toBe(field);
    expect(refused?.message).toContain(says);
    expect(refused?.message).toContain(`${field} holds`);
    // The message quotes nothing it refused: an answer carrying it must be storable.
    expect(refused && storableText(refused.message, 'message')).toBe(refused?.message);
  });

  it.each([
    ['fine', undefined],
    ['order-\ud83d\ude00', undefined],
    ['order\u0000', 'NUL character'],
    ['order-\ud83d', 'lone UTF-16 surrogate'],
  ])('checks the text %j of a text column the same way', (text, says) => {
    const refused = refusal(() => storableText(text, 'key'));
    if (says === undefined) expect(refused).toBeUndefined();
    else expect(refused).toEqual({ field: 'key', message: expect.stringContaining(says) });
  });
});
