import { parseArgs } from 'node:util';

/**
 * One command-line flag: its help line and how its text becomes a value.
 * The default is written once, here, and the help text is generated from it.
 */
export interface Flag<T> {
  kind: 'string' | 'boolean';
  /** e.g. `<s>`: what the value looks like in the help text. */
  placeholder?: string;
  description: string;
  /** The text parsed when the flag is not given; shown as `(default …)`. */
  default?: string;
  /** Shown instead of the default when it is not a fixed text, e.g. `random, printed`. */
  defaultNote?: string;
  read(text: string | boolean | undefined, name: string): T;
}

interface ValueFlagSpec<T> {
  placeholder: string;
  description: string;
  parse(text: string, name: string): T;
  defaultNote?: string;
}

/** A flag with a value; with a `default`, its value is always set. */
export function valueFlag<T>(spec: ValueFlagSpec<T> & { default: string }): Flag<T>;
export function valueFlag<T>(spec: ValueFlagSpec<T>): Flag<T | undefined>;
export function valueFlag<T>(spec: ValueFlagSpec<T> & { default?: string }): Flag<T | undefined> {
  return {
    kind: 'string',
    placeholder: spec.placeholder,
    description: spec.description,
    default: spec.default,
    defaultNote: spec.defaultNote,
    read: (text, name) => (text === undefined ? undefined : spec.parse(String(text), name)),
  };
}

/** A flag without a value: true when given. */
export function switchFlag(description: string): Flag<boolean> {
  return { kind: 'boolean', description, read: (given) => given === true };
}

/** The parsed values of a command's flags, by flag name. */
export type CommandLineValues<Flags extends Record<string, Flag<unknown>>> = { [Name in keyof Flags]: Flags[Name] extends Flag<infer T> ? T : never };

/** A command's flags, its name for the usage line and a note printed under the flags. */
export interface CommandLine<Flags extends Record<string, Flag<unknown>>> {
  /** e.g. `npm run bench --`. */
  command: string;
  flags: Flags;
  footer?: string;
}

/** Parses `argv` against the flags (`--help` is always there); throws with a message naming a bad flag. */
export function parseCommandLine<Flags extends Record<string, Flag<unknown>>>(line: CommandLine<Flags>, argv: readonly string[]): CommandLineValues<Flags> | 'help' {
  const options = Object.fromEntries(
    Object.entries(line.flags).map(([name, flag]) => [name, { type: flag.kind, ...(flag.default !== undefined && { default: flag.default }) }]),
  );
  const { values } = parseArgs({ args: [...argv], strict: true, options: { ...options, help: { type: 'boolean' } } });
  if (values.help) return 'help';
  const given = values as Record<string, string | boolean | undefined>;
  return Object.fromEntries(Object.entries(line.flags).map(([name, flag]) => [name, flag.read(given[name], name)])) as CommandLineValues<Flags>;
}

/**
 * For a script that runs at the top level: the parsed flags, or the help
 * text and exit 0 for `--help`, or the error and the help text and exit 2.
 */
export function commandLineOrExit<Flags extends Record<string, Flag<unknown>>>(line: CommandLine<Flags>): CommandLineValues<Flags> {
  try {
    const values = parseCommandLine(line, process.argv.slice(2));
    if (values !== 'help') return values;
    console.log(usageOf(line));
    process.exit(0);
  } catch (error) {
    console.error(`${error instanceof Error ? error.message : String(error)}\n\n${usageOf(line)}`);
    process.exit(2);
  }
}

/** The help text, generated from the flags. */
export function usageOf(line: CommandLine<Record<string, Flag<unknown>>>): string {
  const entries = [...Object.entries(line.flags), ['help', switchFlag('this text')] as const].map(([name, flag]) => {
    const left = `--${name}${flag.placeholder ? ` ${flag.placeholder}` : ''}`;
    const shown = flag.defaultNote ?? flag.default;
    return { left, right: `${flag.description}${shown !== undefined ? ` (default ${shown})` : ''}` };
  });
  const width = Math.max(...entries.map((entry) => entry.left.length)) + 2;
  const lines = entries.map((entry) => `  ${entry.left.padEnd(width)}${entry.right}`);
  return [`Usage: ${line.command} [flags]`, '', ...lines, ...(line.footer ? ['', line.footer] : [])].join('\n');
}

/** A number above 0, or at least 0 with `zeroAllowed`. */
export function positiveNumber(zeroAllowed = false): (text: string, name: string) => number {
  return (text, name) => {
    const value = Number(text);
    if (!Number.isFinite(value) || value < 0 || (!zeroAllowed && value === 0)) throw new Error(`--${name} must be a ${zeroAllowed ? 'non-negative' : 'positive'} number, got "${text}"`);
    return value;
  };
}

/** A whole number from `min` to `max`. */
export function wholeNumber(min = 1, max = Number.MAX_SAFE_INTEGER): (text: string, name: string) => number {
  return (text, name) => {
    const value = Number(text);
    if (!Number.isInteger(value) || value < min || value > max) throw new Error(`--${name} must be a whole number from ${min}${max < Number.MAX_SAFE_INTEGER ? ` to ${max}` : ' up'}, got "${text}"`);
    return value;
  };
}

/** The text as given. */
export function text(value: string): string {
  return value;
}

/** A results file name: letters, digits, `.`, `_` and `-`. */
export function fileName(value: string, name: string): string {
  if (!/^[\w.-]+$/.test(value)) throw new Error(`--${name} may hold letters, digits, ".", "_" and "-" only`);
  return value;
}

/** A comma-separated list, items trimmed, empty ones dropped. */
export function list(value: string): string[] {
  return value
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);
}
