/**
 * The headers of an Express response or a Fastify reply, as the handler
 * found them. A handler that ran but whose outcome is not the one sent (a
 * duplicate claimed at commit that lost to the winner) may have set headers
 * on the live response, such as a `Location` for an order that rolled back:
 * restoring them keeps every byte of the answer the winner's, or the
 * module's own error's.
 */
export function snapshotResponseHeaders(response: unknown): () => void {
  const target = response as HeaderTarget;
  const before = Object.entries(target.getHeaders());
  return () => {
    const kept = new Set(before.map(([name]) => name));
    for (const name of Object.keys(target.getHeaders())) {
      if (kept.has(name)) continue;
      target.removeHeader(name);
      target.raw?.removeHeader(name); // a Fastify reply keeps headers of its own and on its raw response
    }
    for (const [name, value] of before) {
      if (value === undefined) continue;
      if (target.raw) target.header!(name, value);
      else target.setHeader!(name, value);
    }
  };
}

/** What Express's response (a Node ServerResponse) and Fastify's reply both offer, and where they differ. */
interface HeaderTarget {
  getHeaders(): Record<string, string | string[] | number | undefined>;
  removeHeader(name: string): void;
  /** Express: Node's ServerResponse. */
  setHeader?(name: string, value: string | string[] | number): void;
  /** Fastify: the reply's own setter, and the Node response under it. */
  header?(name: string, value: string | string[] | number): void;
  raw?: { removeHeader(name: string): void };
}
