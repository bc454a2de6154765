import { canonicalJson } from './canonical-json.js';

/** The parts of a request that can define an operation. */
interface FingerprintSource {
  params: unknown;
  query: unknown;
  body: unknown;
}

/**
 * Which request fields define the operation, and so must match on a retry:
 * - a list of dotted paths to pick, e.g. `['body', 'params.id']`;
 * - `{ exclude: [...] }` to drop paths from the default (params, query, body),
 *   e.g. `{ exclude: ['body.clientSentAt'] }`;
 * - a function of the request returning any JSON value, or a promise of one.
 */
export type FingerprintFields = readonly string[] | { exclude: readonly string[] } | ((request: any) => unknown);

/**
 * The RFC 8785 canonical JSON of the operation and the chosen fields: key
 * order, whitespace and number spelling do not matter. The fingerprint is
 * taken of it (request-fingerprints.ts); fields without one throw. Fields
 * with a body the module read itself name how (`bodyReadAs`): no parsed body,
 * whatever its members, writes the same.
 */
export function canonicalRequest(operation: string, fields: unknown, bodyReadAs?: ReadBody['readAs']): string {
  return canonicalJson(bodyReadAs === undefined ? { operation, fields } : { operation, fields, bodyReadAs }) ?? '';
}

/**
 * The fields as `JSON.stringify` writes them; undefined where it cannot.
 *
 * For data a parser produced (a JSON, form or query parser, GraphQL's
 * arguments: strings, finite numbers, booleans, null, arrays and plain
 * objects), fields that write the same JSON are the same values in the same
 * key order, and so write the same canonical JSON: equal strings here mean
 * equal fingerprints. A replay from the cache compares these strings, and
 * canonicalises and hashes only when they differ. Not for the value of a
 * fingerprint function, which may hold what the two write differently
 * (NaN, a function, a `toJSON` that reads its key).
 */
export function fieldsJsonOf(fields: unknown): string | undefined {
  try {
    const json = JSON.stringify(fields);
    // JSON.stringify writes NaN and ±Infinity (a JSON parser reads 1e400 as Infinity) as null, where the
    // canonical form refuses them: no shortcut then, so the answer is the one a cold cache would give.
    if (json?.includes('null')) JSON.stringify(fields, refuseNonFinite);
    return json;
  } catch {
    return undefined; // a BigInt or a cycle: the canonical fingerprint refuses it too
  }
}

function refuseNonFinite(_name: string, value: unknown): unknown {
  if (typeof value === 'number' && !Number.isFinite(value)) throw new RangeError('not finite');
  return value;
}

/**
 * A body the module read itself, or a parser left as bytes (see
 * http/request-body.ts): a digest of its bytes, fingerprinted in place of
 * `request.body`, and named by how it was read (by its multipart parts, or
 * as bytes), so that it never meets a parser's body of the same JSON. A
 * path into it picks or drops nothing of it: it counts whole.
 */
export interface ReadBody {
  body: unknown;
  readAs: 'multipart' | 'bytes';
}

/** Builds the function that extracts the fingerprinted fields of a request. */
export function fingerprintFieldsOf(spec: FingerprintFields | undefined): (request: any, read?: ReadBody) => unknown {
  if (typeof spec === 'function') return spec;
  const sourceOf = (request: FingerprintSource, read: ReadBody | undefined): FingerprintSource => (read ? { params: request.params, query: request.query, body: read.body } : request);
  const defaults = (request: FingerprintSource) => ({ params: request.params, query: request.query, body: request.body });
  if (spec === undefined) return (request, read) => defaults(sourceOf(request, read));
  if (isExclusion(spec)) {
    const paths = spec.exclude.map(splitPath);
    const outsideBody = paths.filter((path) => path[0] !== 'body' || path.length === 1);
    return (request, read) => (read ? outsideBody : paths).reduce(withoutPath, defaults(sourceOf(request, read)) as unknown);
  }
  const paths = spec.map(splitPath);
  return (request, read) => {
    const source = sourceOf(request, read);
    return Object.fromEntries(paths.map((path) => [path.join('.'), valueAt(source, read && path[0] === 'body' ? ['body'] : path)]));
  };
}

/** Whether the fields a spec picks include the body: only then does an unread body need reading. A function's are its own. */
export function readsBody(spec: FingerprintFields | undefined): boolean {
  if (spec === undefined) return true;
  if (typeof spec === 'function') return false;
  return isExclusion(spec) || spec.some((path) => path === 'body' || path.startsWith('body.'));
}

function isExclusion(spec: readonly string[] | { exclude: readonly string[] }): spec is { exclude: readonly string[] } {
  return !Array.isArray(spec);
}

function splitPath(path: string): string[] {
  return path.split('.');
}

function valueAt(source: unknown, path: readonly string[]): unknown {
  return path.reduce<unknown>((node, segment) => (isRecord(node) ? node[segment] : undefined), source);
}

/** A copy of `source` without the value at `path`; the request is left untouched. */
function withoutPath(source: unknown, path: readonly string[]): unknown {
  if (!isRecord(source) || path.length === 0 || !(path[0] in source)) return source;
  const [head, ...rest] = path;
  const copy = { ...source };
  if (rest.length === 0) delete copy[head];
  else copy[head] = withoutPath(copy[head], rest);
  return copy;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
