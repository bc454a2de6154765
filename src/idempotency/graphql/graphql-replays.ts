/** `extensions.idempotency` of a GraphQL response in which protected mutation fields answered. */
export interface IdempotencyResponseExtension {
  /** True when every protected field that answered replayed a recorded outcome; false when any ran. */
  replayed: boolean;
  /** Per protected field that answered, by its key in `data` (its alias, else its name). */
  fields: Record<string, { replayed: boolean }>;
}

/** What the protected fields of each operation answered, by GraphQL context (one per operation). */
const answers = new WeakMap<object, Map<string, boolean>>();

/** Notes that a protected field answered from a record (`replayed`) or ran. */
export function noteFieldAnswer(context: object | undefined, responseKey: string | number, replayed: boolean): void {
  if (typeof context !== 'object' || context === null) return;
  let fields = answers.get(context);
  if (!fields) answers.set(context, (fields = new Map()));
  fields.set(String(responseKey), replayed);
}

/**
 * The `extensions.idempotency` member for the operation of a GraphQL
 * context, or undefined when no protected field answered in it. For server
 * integrations other than `idempotencyApolloPlugin()` and
 * `idempotencyMercuriusHooks()`.
 */
export function idempotencyExtensionOf(context: unknown): IdempotencyResponseExtension | undefined {
  const fields = typeof context === 'object' && context !== null ? answers.get(context) : undefined;
  if (!fields || fields.size === 0) return undefined;
  const entries = [...fields];
  return {
    replayed: entries.every(([, replayed]) => replayed),
    fields: Object.fromEntries(entries.map(([key, replayed]) => [key, { replayed }])),
  };
}
