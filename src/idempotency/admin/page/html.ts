/** Markup that is already safe: what `html` builds, never text from a request or a record. */
export class Markup {
  constructor(readonly text: string) {}

  toString(): string {
    return this.text;
  }
}

type Value = Markup | string | number | boolean | null | undefined | readonly Value[];

/**
 * A tagged template for the page: every interpolated value is escaped as
 * text, unless it is `Markup` (what another `html` call built); arrays are
 * joined, `null`, `undefined` and `false` render nothing. Keys, scopes,
 * bodies and errors reach the page only through it.
 *
 * @example
 * html`<td>${record.key}</td>`
 */
export function html(strings: TemplateStringsArray, ...values: Value[]): Markup {
  let text = strings[0];
  values.forEach((value, index) => (text += render(value) + strings[index + 1]));
  return new Markup(text);
}

function render(value: Value): string {
  if (value instanceof Markup) return value.text;
  if (Array.isArray(value)) return value.map(render).join('');
  if (value === null || value === undefined || value === false) return '';
  return escape(String(value));
}

function escape(text: string): string {
  return text.replace(/[&<>"']/g, (character) => `&#${character.charCodeAt(0)};`);
}

/** A query string of the parameters that are set. */
export function query(params: Record<string, string | number | undefined>): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) if (value !== undefined && value !== '') search.set(name, String(value));
  const text = search.toString();
  return text ? `?${text}` : '';
}

/** An instant as the page shows it: UTC, to the millisecond. */
export function when(date: Date | null | undefined): string {
  return date ? date.toISOString().replace('T', ' ').replace('Z', ' UTC') : '';
}
