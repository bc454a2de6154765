/** How many examples of a violation the report keeps; the count is always complete. */
const MAX_EXAMPLES = 10;

/** The outcome of one invariant: its violations, counted, with a few examples. */
export interface InvariantResult {
  name: string;
  description: string;
  violations: number;
  examples: string[];
}

/** Counts the violations of one invariant as the checks find them. */
export class Tally {
  private readonly result: InvariantResult;

  constructor(name: string, description: string) {
    this.result = { name, description, violations: 0, examples: [] };
  }

  fail(example: string): void {
    this.result.violations++;
    if (this.result.examples.length < MAX_EXAMPLES) this.result.examples.push(example);
  }

  get done(): InvariantResult {
    return this.result;
  }
}

/** The names of the fields whose values differ (as JSON), or an empty list. */
export function differingFields(actual: Record<string, unknown>, expected: Record<string, unknown>): string[] {
  const names = new Set([...Object.keys(actual), ...Object.keys(expected)]);
  return [...names].filter((name) => JSON.stringify(actual[name]) !== JSON.stringify(expected[name]));
}

/** The body as JSON, or undefined when it is not. */
export function parseBody(text: string | undefined): Record<string, unknown> | undefined {
  if (!text) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
