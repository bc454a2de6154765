/** The demo's default credentials, documented in docs/demo.md. */
export const DEFAULT_API_KEYS = 'demo-key-acme:acme,demo-key-globex:globex';

/** Parses `API_KEYS="key:tenant,key:tenant"` into a key → tenant map. */
export function parseApiKeys(spec: string): ReadonlyMap<string, string> {
  const keys = new Map<string, string>();
  for (const entry of spec.split(',').map((part) => part.trim()).filter(Boolean)) {
    const separator = entry.lastIndexOf(':');
    if (separator <= 0 || separator === entry.length - 1) throw new Error(`API_KEYS entry "${entry}" is not of the form key:tenant`);
    keys.set(entry.slice(0, separator), entry.slice(separator + 1));
  }
  return keys;
}
