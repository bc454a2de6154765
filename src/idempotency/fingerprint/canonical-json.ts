/** An array or object being written: how far it got, and what holds it on the path from the root. */
interface OpenContainer {
  value: object;
  /** Member names in canonical order; undefined for an array. */
  names: string[] | undefined;
  next: number;
  /** Whether a member was written: a comma goes before the next. */
  started: boolean;
  /** The `toJSON` objects that led to it: like the container, meeting one again below it is a cycle. */
  wrappers: object[] | undefined;
}

/** Up to how many member names an object's are sorted by insertion. */
const FEW_NAMES = 16;
const SURROGATE = /[\ud800-\udfff]/;
// In `u` mode a surrogate pair is one code point, so only an unpaired half is in this category.
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * The RFC 8785 (JCS) canonical JSON of a value: numbers and strings as
 * ECMAScript writes them, object members sorted by the UTF-16 code units of
 * their names, no whitespace. What I-JSON forbids throws: NaN, ±Infinity, a
 * string with a lone surrogate, and a cycle.
 *
 * Values that are not JSON are written as the `canonicalize` package (5.x)
 * wrote them, so that fingerprints recorded with it stay the same: as
 * `JSON.stringify` writes them (`toJSON()`, boxed primitives; `undefined`,
 * functions and symbols left out of objects and null in arrays), except that
 * a `toJSON()` that returns another object with one is unwrapped again. It
 * walks an explicit stack, so that a body nested deeper than the call stack
 * allows is fingerprinted like any other.
 *
 * @example
 * canonicalJson({ b: [1e21, 'é'], a: 1.50 }); // '{"a":1.5,"b":[1e+21,"é"]}'
 */
export function canonicalJson(value: unknown): string | undefined {
  const path = new Set<object>();
  const root = written(value, path);
  if (typeof root !== 'object') return root;
  let text = opening(root);
  const open = [root];
  // Each pass writes members of the innermost open container until one opens a container of its own.
  containers: while (open.length > 0) {
    const container = open[open.length - 1];
    const { value: node, names } = container;
    if (names === undefined) {
      const items = node as unknown[];
      while (container.next < items.length) {
        const index = container.next++;
        const item = items[index];
        // An item with no JSON text is written as null, as JSON.stringify writes it.
        const child = (hasNoText(item) ? undefined : written(item, path)) ?? 'null';
        text += index > 0 ? ',' : '';
        if (typeof child === 'string') text += child;
        else {
          text += opening(child);
          open.push(child);
          continue containers;
        }
      }
      text += ']';
    } else {
      while (container.next < names.length) {
        const name = names[container.next++];
        const member = (node as Record<string, unknown>)[name];
        // A member with no JSON text is left out, as JSON.stringify leaves it out.
        const child = hasNoText(member) ? undefined : written(member, path);
        if (child === undefined) continue;
        text += `${container.started ? ',' : ''}${primitiveText(name)}:`;
        container.started = true;
        if (typeof child === 'string') text += child;
        else {
          text += opening(child);
          open.push(child);
          continue containers;
        }
      }
      text += '}';
    }
    path.delete(node);
    for (const wrapper of container.wrappers ?? []) path.delete(wrapper);
    open.pop();
  }
  return text;
}

/** A value's text once `toJSON()` (to the end of a chain of them) and boxed primitives are unwrapped; or the container it opens. */
function written(value: unknown, path: Set<object>): string | undefined | OpenContainer {
  if (!isObject(value)) return primitiveText(value);
  let wrappers: object[] | undefined;
  while (isObject(value) && typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    enter(value, path);
    (wrappers ??= []).push(value);
    value = (value as { toJSON(): unknown }).toJSON();
  }
  if (value instanceof Number || value instanceof String || value instanceof Boolean) value = value.valueOf();
  if (!isObject(value)) {
    for (const wrapper of wrappers ?? []) path.delete(wrapper);
    return primitiveText(value);
  }
  enter(value, path);
  return { value, names: Array.isArray(value) ? undefined : canonicalOrder(Object.keys(value)), next: 0, started: false, wrappers };
}

/**
 * Member names sorted by their UTF-16 code units, as `sort()` with no
 * comparator sorts strings. A few names are sorted in place by insertion:
 * each `sort()` allocates a work space of its own (over a kilobyte), and a
 * request's fingerprint sorts every object of its params, query and body.
 */
function canonicalOrder(names: string[]): string[] {
  if (names.length > FEW_NAMES) return names.sort();
  for (let index = 1; index < names.length; index++) {
    const name = names[index];
    let at = index;
    for (; at > 0 && names[at - 1] > name; at--) names[at] = names[at - 1];
    names[at] = name;
  }
  return names;
}

/** A primitive as JSON.stringify writes it, once RFC 8785's refusals are made; undefined for one without JSON text. */
function primitiveText(value: unknown): string | undefined {
  if (typeof value === 'number' && !Number.isFinite(value)) throw new Error(Number.isNaN(value) ? 'NaN is not allowed' : 'Infinity is not allowed');
  if (typeof value === 'string' && SURROGATE.test(value) && LONE_SURROGATE.test(value)) throw new Error('Lone surrogate is not allowed');
  return JSON.stringify(value);
}

function enter(value: object, path: Set<object>): void {
  if (path.has(value)) throw new CircularReferenceError();
  path.add(value);
}

function opening(container: OpenContainer): string {
  return container.names ? '{' : '[';
}

function hasNoText(value: unknown): boolean {
  return value === undefined || typeof value === 'function' || typeof value === 'symbol';
}

function isObject(value: unknown): value is object {
  return typeof value === 'object' && value !== null;
}

/**
 * A value that holds itself. Nothing a client sends parses into one: it comes
 * from the server's side (a body parser's objects, a fingerprint function).
 */
export class CircularReferenceError extends Error {
  constructor() {
    super('Circular reference detected');
  }
}
