import { canonicalJson } from './canonical-json.js';

/** The IEEE-754 double with these 64 bits, written as 16 hex digits. */
function double(hex: string): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setBigUint64(0, BigInt(`0x${hex}`));
  return view.getFloat64(0);
}
const utf8Hex = (text: string) => Buffer.from(text, 'utf8').toString('hex').replace(/(..)(?!$)/g, '$1 ');

describe('canonical JSON (RFC 8785)', () => {
  // RFC 8785, Appendix B: number serialization samples.
  it.each([
    ['0000000000000000', '0'],
    ['8000000000000000', '0'],
    ['0000000000000001', '5e-324'],
    ['8000000000000001', '-5e-324'],
    ['7fefffffffffffff', '1.7976931348623157e+308'],
    ['ffefffffffffffff', '-1.7976931348623157e+308'],
    ['4340000000000000', '9007199254740992'],
    ['c340000000000000', '-9007199254740992'],
    ['4430000000000000', '295147905179352830000'],
    ['44b52d02c7e14af5', '9.999999999999997e+22'],
    ['44b52d02c7e14af6', '1e+23'],
    ['44b52d02c7e14af7', '1.0000000000000001e+23'],
    ['444b1ae4d6e2ef4e', '999999999999999700000'],
    ['444b1ae4d6e2ef4f', '999999999999999900000'],
    ['444b1ae4d6e2ef50', '1e+21'],
    ['3eb0c6f7a0b5ed8c', '9.999999999999997e-7'],
    ['3eb0c6f7a0b5ed8d', '0.000001'],
    ['41b3de4355555553', '333333333.3333332'],
    ['41b3de4355555554', '333333333.33333325'],
    ['41b3de4355555555', '333333333.3333333'],
    ['41b3de4355555556', '333333333.3333334'],
    ['41b3de4355555557', '333333333.33333343'],
    ['becbf647612f3696', '-0.0000033333333333333333'],
    ['43143ff3c1cb0959', '1424953923781206.2'],
  ])('writes the double %s as %s (Appendix B)', (bits, expected) => {
    expect(canonicalJson(double(bits))).toBe(expected);
  });

  it.each([
    ['7fffffffffffffff', /NaN/],
    ['7ff0000000000000', /Infinity/],
    ['fff0000000000000', /Infinity/],
  ])('refuses the double %s, which JSON cannot carry (Appendix B)', (bits, message) => {
    expect(() => canonicalJson(double(bits))).toThrow(message);
    expect(() => canonicalJson({ n: [double(bits)] })).toThrow(message);
  });

  // How a number spelled in a request body is written: the shortest text that reads back as the same double.
  it.each([
    ['1e21', '1e+21'],
    ['1e20', '100000000000000000000'],
    ['1e-7', '1e-7'],
    ['0.000001', '0.000001'],
    ['-0', '0'],
    ['-0.0e5', '0'],
    ['5e-324', '5e-324'],
    ['1.7976931348623157e308', '1.7976931348623157e+308'],
    ['333333333.33333329', '333333333.3333333'],
    ['1E30', '1e+30'],
    ['4.50', '4.5'],
    ['2e-3', '0.002'],
    ['0.000000000000000000000000001', '1e-27'],
    ['123e-20', '1.23e-18'],
    ['9007199254740993', '9007199254740992'],
    ['0.1', '0.1'],
    ['-1.5E+2', '-150'],
  ])('writes the number spelled %s as %s', (spelled, expected) => {
    expect(canonicalJson(JSON.parse(spelled))).toBe(expected);
  });

  // The input and output files of the JCS reference test data (json-canonicalization's testdata); values and weird are RFC 8785's 3.2.2 and 3.2.3 samples.
  it.each([
    ['arrays', '[\n  56,\n  {\n    "d": true,\n    "10": null,\n    "1": [ ]\n  }\n]', '[56,{"1":[],"10":null,"d":true}]'],
    [
      'french',
      '{\n  "peach": "This sorting order",\n  "péché": "is wrong according to French",\n  "pêche": "but canonicalization MUST",\n  "sin":   "ignore locale"\n}',
      '{"peach":"This sorting order","péché":"is wrong according to French","pêche":"but canonicalization MUST","sin":"ignore locale"}',
    ],
    [
      'structures',
      '{\n  "1": {"f": {"f": "hi","F": 5} ,"\\n": 56.0},\n  "10": { },\n  "": "empty",\n  "a": { },\n  "111": [ {"e": "yes","E": "no" } ],\n  "A": { }\n}',
      '{"":"empty","1":{"\\n":56,"f":{"F":5,"f":"hi"}},"10":{},"111":[{"E":"no","e":"yes"}],"A":{},"a":{}}',
    ],
    ['unicode', '{\n  "Unnormalized Unicode":"A\\u030a"\n}', '{"Unnormalized Unicode":"A\u030a"}'],
    [
      'values',
      '{\n  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],\n  "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",\n  "literals": [null, true, false]\n}',
      '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
    ],
    [
      'weird',
      '{\n  "\\u20ac": "Euro Sign",\n  "\\r": "Carriage Return",\n  "\\u000a": "Newline",\n  "1": "One",\n  "\\u0080": "Control\\u007f",\n  "\\ud83d\\ude02": "Smiley",\n  "\\u00f6": "Latin Small Letter O With Diaeresis",\n  "\\ufb33": "Hebrew Letter Dalet With Dagesh",\n  "</script>": "Browser Challenge"\n}',
      '{"\\n":"Newline","\\r":"Carriage Return","1":"One","</script>":"Browser Challenge","\u0080":"Control\u007f","\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign","\ud83d\ude02":"Smiley","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    ],
  ])('canonicalises the %s sample', (_name, input, expected) => {
    expect(canonicalJson(JSON.parse(input))).toBe(expected);
  });

  it('writes the RFC’s sample as the UTF-8 bytes of 3.2.4', () => {
    const sample = { numbers: [333333333.33333329, 1e30, 4.5, 2e-3, 1e-27], string: '\u20ac$\u000f\nA\'B"\\\\"/', literals: [null, true, false] };
    expect(utf8Hex(canonicalJson(sample)!)).toBe(
      '7b 22 6c 69 74 65 72 61 6c 73 22 3a 5b 6e 75 6c 6c 2c 74 72 75 65 2c 66 61 6c 73 65 5d 2c 22 6e ' +
        '75 6d 62 65 72 73 22 3a 5b 33 33 33 33 33 33 33 33 33 2e 33 33 33 33 33 33 33 2c 31 65 2b 33 30 ' +
        '2c 34 2e 35 2c 30 2e 30 30 32 2c 31 65 2d 32 37 5d 2c 22 73 74 72 69 6e 67 22 3a 22 e2 82 ac 24 ' +
        '5c 75 30 30 30 66 5c 6e 41 27 42 5c 22 5c 5c 5c 5c 5c 22 2f 22 7d',
    );
  });

  it.each([
    ['backspace, tab, line feed, form feed, carriage return', '\b\t\n\f\r', '"\\b\\t\\n\\f\\r"'],
    ['the other C0 controls, in lower-case hex', '\u0000\u0001\u000b\u000e\u001f', '"\\u0000\\u0001\\u000b\\u000e\\u001f"'],
    ['a quote and a backslash', '"\\', '"\\"\\\\"'],
    ['a solidus, unescaped', '</a>', '"</a>"'],
    ['DEL and C1 controls, unescaped', '\u007f\u0080\u009f', '"\u007f\u0080\u009f"'],
    ['U+2028 and U+2029, unescaped', '\u2028\u2029', '"\u2028\u2029"'],
    ['a surrogate pair, unescaped', '\ud83d\ude02', '"\ud83d\ude02"'],
    ['a combining sequence, unnormalised', 'e\u0301', '"e\u0301"'],
  ])('escapes %s as JSON requires and nothing else', (_case, text, expected) => {
    expect(canonicalJson(text)).toBe(expected);
    expect(canonicalJson({ [text]: text })).toBe(`{${expected}:${expected}}`);
  });

  it.each([
    ['a lone high surrogate', 'a\ud800b'],
    ['a lone low surrogate', '\udfff'],
    ['a high surrogate at the end', 'x\ud83d'],
    ['a pair in the wrong order', '\ude02\ud83d'],
  ])('refuses %s, in a value or a member name (I-JSON)', (_case, text) => {
    expect(() => canonicalJson(text)).toThrow('Lone surrogate is not allowed');
    expect(() => canonicalJson({ note: [text] })).toThrow('Lone surrogate is not allowed');
    expect(() => canonicalJson({ [text]: 1 })).toThrow('Lone surrogate is not allowed');
  });

  it.each([
    ['upper case before lower case', { b: 1, a: 2, B: 3, A: 4 }, '{"A":4,"B":3,"a":2,"b":1}'],
    ['digits as text, not as numbers', { 10: 'a', 9: 'b', 1: 'c' }, '{"1":"c","10":"a","9":"b"}'],
    ['the empty name first, a prefix before its extensions', { ab: 1, '': 2, a: 3 }, '{"":2,"a":3,"ab":1}'],
    ['by code unit: a surrogate pair (U+1F602) before U+FB33', { '\ufb33': 1, '\ud83d\ude02': 2 }, '{"\ud83d\ude02":2,"\ufb33":1}'],
    ['by code unit: U+E000 after a pair for U+10000', { '\ue000': 1, '\ud800\udc00': 2 }, '{"\ud800\udc00":2,"\ue000":1}'],
    ['nested members too, arrays kept in order', { z: [{ y: 1, x: 2 }, 3], a: { c: null, b: true } }, '{"a":{"b":true,"c":null},"z":[{"x":2,"y":1},3]}'],
    // Past sixteen names the order comes from sort() rather than the insertion of a few.
    ['of more than sixteen', Object.fromEntries([...'tsrqponmlkjihgfedcbA'].map((name) => [name, name])), `{${[...'Abcdefghijklmnopqrst'].map((name) => `"${name}":"${name}"`).join(',')}}`],
    ['of exactly sixteen, by code unit', Object.fromEntries([...'ponmlkjihgfedc', '\ufb33', '\ud83d\ude02'].map((name) => [name, 1])), `{${[...'cdefghijklmnop', '\ud83d\ude02', '\ufb33'].map((name) => `"${name}":1`).join(',')}}`],
  ])('orders member names %s', (_case, value, expected) => {
    expect(canonicalJson(value)).toBe(expected);
  });

  it('writes a value nested deeper than a recursive writer’s call stack goes', () => {
    const depth = 20_000;
    expect(canonicalJson(JSON.parse(`${'['.repeat(depth)}${']'.repeat(depth)}`))).toBe(`${'['.repeat(depth)}${']'.repeat(depth)}`);
    const objects = `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
    expect(canonicalJson(JSON.parse(objects))).toBe(objects);
  });

  it('writes what is not JSON as JSON.stringify does, and refuses a cycle', () => {
    const shared = { n: 1 };
    expect(canonicalJson({ at: new Date(0), gone: undefined, fn: () => 1, list: [undefined, () => 1, Symbol('s')], boxed: [new Number(2), new String('s'), new Boolean(false)] })).toBe(
      '{"at":"1970-01-01T00:00:00.000Z","boxed":[2,"s",false],"list":[null,null,null]}',
    );
    expect(canonicalJson({ twice: [shared, shared], none: { toJSON: () => undefined } })).toBe('{"twice":[{"n":1},{"n":1}]}');
    expect(canonicalJson(undefined)).toBeUndefined();
    // Unwrapped to the end, as canonicalize 5 did, where JSON.stringify unwraps once.
    expect(canonicalJson({ toJSON: () => ({ toJSON: () => 'inner' }) })).toBe('"inner"');
    const cycle: Record<string, unknown> = {};
    cycle.self = [cycle];
    expect(() => canonicalJson(cycle)).toThrow('Circular reference detected');
    const selfish = { toJSON: () => selfish };
    expect(() => canonicalJson(selfish)).toThrow('Circular reference detected');
    expect(() => canonicalJson({ n: 1n })).toThrow(TypeError);
  });
});
