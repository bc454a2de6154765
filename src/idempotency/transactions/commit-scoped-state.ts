import { QueryFailedError } from 'typeorm';
import { type IsolationLevel, isAtLeast, isolationLevelOf } from '../options/idempotency.options.js';

/** Runs SQL of the module's own on the request's connection, past the unit wrappers; answers the rows. */
export type OwnQuery = (sql: string, parameters?: unknown[]) => Promise<Array<Record<string, unknown>>>;

/**
 * Any statement that may leave state a COMMIT would end: the cheap test run
 * on every statement of the handler's, before the precise ones below. An
 * UPDATE's ` SET ` does not match: only a statement that starts with SET.
 */
const MAY_SCOPE = /(?:^|;)\s*SET\s+(?:LOCAL|CONSTRAINTS|TRANSACTION)\b|set_config\s*\(|\bON\s+COMMIT\s+(?:DROP|DELETE)\b/i;
const SET_LOCAL = /(?:^|;)\s*SET\s+LOCAL\s+(?:(ROLE|SESSION\s+AUTHORIZATION|TIME\s+ZONE)\b|"?([A-Za-z_][\w.$]*)"?)/gi;
const SET_CONFIG = /set_config\s*\(/gi;
/** A literal or a parameter, maybe cast: what set_config()'s name and scope must be for the module to read them. */
const LITERAL_OR_PARAMETER = /^(?:'((?:[^']|'')*)'|\$(\d+))(?:\s*::\s*\w+)?$/;
const SET_CONSTRAINTS = /(?:^|;)\s*SET\s+CONSTRAINTS\b/i;
const SET_ISOLATION = /^\s*SET\s+TRANSACTION\s+ISOLATION\s+LEVEL\s+(READ\s+UNCOMMITTED|READ\s+COMMITTED|REPEATABLE\s+READ|SERIALIZABLE)\s*;?\s*$/i;
const TEMP_TABLE = /CREATE\s+(?:GLOBAL\s+|LOCAL\s+)?TEMP(?:ORARY)?\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?("(?:[^"]|"")+"|[A-Za-z_][\w$]*)[^;]*?\bON\s+COMMIT\s+(DROP|DELETE\s+ROWS)/gi;
const ON_COMMIT = /\bON\s+COMMIT\s+(?:DROP|DELETE)/gi;

/** The setting names `SET LOCAL` spells as keywords. */
const KEYWORD_SETTINGS: Readonly<Record<string, string>> = { ROLE: 'role', 'SESSION AUTHORIZATION': 'session_authorization', 'TIME ZONE': 'timezone' };

/** A statement the request's transaction answers itself, instead of sending it. */
export interface Replacement {
  sql: string;
}

/** Settings this unit may change: `SET LOCAL` and `set_config(…, true)`. */
type Settings = Map<string, string | null>;

/**
 * What a COMMIT of the app's own transaction would have ended, tracked for
 * one unit of the request's transaction (a `transaction()` callback, a
 * `save()`, a statement), and ended when the unit does, since the unit is a
 * savepoint whose RELEASE ends none of it:
 *
 * - settings made with `SET LOCAL` or `set_config(…, true)` (a tenant's
 *   `search_path`, a `statement_timeout`, `role`, an RLS variable) go back to
 *   what they were before the unit;
 * - tables created `ON COMMIT DROP` are dropped, and those `ON COMMIT
 *   DELETE ROWS` emptied;
 * - deferred constraints are checked, once, where the app's code awaiting
 *   the unit meets their violation, as it would have met it from COMMIT;
 *   then the INITIALLY DEFERRED ones are deferred again for what follows,
 *   as a new transaction would find them. That costs two statements at the
 *   end of every unit, so it runs where the database has an INITIALLY
 *   DEFERRED constraint (read at startup) or the request ran SET CONSTRAINTS.
 *
 * `SET TRANSACTION ISOLATION LEVEL` is answered here: at or below the
 * request's level it is what the unit already runs at; above it, refused
 * with the route option that gives it.
 */
export class CommitScopedState {
  private settings?: Settings;
  private readonly dropped: string[] = [];
  private readonly emptied: string[] = [];

  /** Whether deferred constraints are checked at the unit's end; SET CONSTRAINTS turns it on for the rest of the request. */
  private checksDeferred: boolean;

  constructor(
    private readonly isolation: IsolationLevel,
    /** The database's INITIALLY DEFERRED constraints, qualified and quoted. */
    private readonly deferredConstraints: readonly string[],
  ) {
    this.checksDeferred = deferredConstraints.length > 0;
  }

  /** Starts tracking a new unit. */
  reset(): void {
    this.settings = undefined;
    this.dropped.length = 0;
    this.emptied.length = 0;
  }

  /**
   * Looks at a statement of the handler's before it is sent: records what it
   * will change (reading the settings it sets first), or answers it instead.
   * Undefined, at once, for the statements that change none of it.
   */
  before(sql: unknown, parameters: unknown[] | undefined, query: OwnQuery): Promise<Replacement | undefined> | undefined {
    if (typeof sql !== 'string' || !MAY_SCOPE.test(sql)) return undefined;
    return this.inspect(sql, parameters, query);
  }

  /** Whether the unit left anything for `end()` to do. */
  get hasEnd(): boolean {
    return this.checksDeferred || this.dropped.length > 0 || this.emptied.length > 0 || (this.settings?.size ?? 0) > 0;
  }

  private async inspect(sql: string, parameters: unknown[] | undefined, query: OwnQuery): Promise<Replacement | undefined> {
    const isolation = SET_ISOLATION.exec(sql);
    if (isolation) return this.isolationAsked(isolationLevelOf(isolation[1].replace(/\s+/g, ' '))!, 'SET TRANSACTION ISOLATION LEVEL');
    if (SET_CONSTRAINTS.test(sql)) this.checksDeferred = true;
    this.tablesOf(sql);
    const names = settingNamesOf(sql, parameters);
    const unknown = names.filter((name) => !this.settings?.has(name));
    if (unknown.length > 0) {
      const rows = await query('SELECT n AS name, current_setting(n, true) AS value FROM unnest($1::text[]) AS n', [unknown]);
      this.settings ??= new Map();
      for (const row of rows) this.settings.set(row.name as string, row.value as string | null);
    }
    return undefined;
  }

  /** Ends what the unit started, as its COMMIT would have; a deferred constraint's violation throws here. */
  async end(query: OwnQuery, send: (statements: string[]) => Promise<void>): Promise<void> {
    if (this.checksDeferred) {
      const check = ['SET CONSTRAINTS ALL IMMEDIATE'];
      if (this.deferredConstraints.length > 0) check.push(`SET CONSTRAINTS ${this.deferredConstraints.join(', ')} DEFERRED`);
      await send(check).catch((error: unknown) => {
        throw error instanceof QueryFailedError ? error : new QueryFailedError(check[0], [], error as Error);
      });
    }
    const cleanup = [...this.dropped.map((table) => `DROP TABLE IF EXISTS pg_temp.${table}`), ...this.emptied.map((table) => `DELETE FROM pg_temp.${table}`)];
    if (cleanup.length > 0) await send(cleanup);
    if (this.settings && this.settings.size > 0) {
      const names = [...this.settings.keys()];
      // A setting the unit created reads as '' once a COMMIT ended it.
      const values = names.map((name) => this.settings!.get(name) ?? '');
      await query('SELECT set_config(n, v, true) FROM unnest($1::text[], $2::text[]) AS s(n, v)', [names, values]);
    }
  }

  /**
   * A transaction asked for at `level` joining the request's transaction (a
   * `transaction(level, …)`, a QueryRunner's `startTransaction(level)`): fine
   * at or below its level, refused above it. `what` names it in the refusal.
   */
  checkNested(level: unknown, what = `transaction('${String(level)}', …)`): void {
    const asked = isolationLevelOf(level);
    if (asked) this.isolationAsked(asked, what);
  }

  private isolationAsked(asked: IsolationLevel, what: string): Replacement {
    if (isAtLeast(this.isolation, asked)) return { sql: 'SELECT WHERE false' };
    throw new Error(
      `${what} inside an @Idempotent() request joins the request's ${this.isolation} transaction as a savepoint, and PostgreSQL cannot raise ` +
        `the isolation level of a running transaction. Give the route the level it needs: @Idempotent({ isolation: '${asked}' }), ` +
        `or set isolationLevel on the DataSource for every request; or run it in a transaction of its own with ` +
        `IdempotencyTransactionHost.outside(() => dataSource.transaction('${asked}', …)), which then commits apart from the recorded outcome.`,
    );
  }

  /** Temporary tables created ON COMMIT DROP or DELETE ROWS, as `pg_temp` names. */
  private tablesOf(sql: string): void {
    const found = [...sql.matchAll(TEMP_TABLE)];
    if (found.length < (sql.match(ON_COMMIT)?.length ?? 0)) {
      throw new Error(`A temporary table ON COMMIT DROP or DELETE ROWS whose name cannot be read from the statement: name it plainly in CREATE TEMP TABLE (${sql.slice(0, 120)}).`);
    }
    for (const [, name, action] of found) (action.toUpperCase() === 'DROP' ? this.dropped : this.emptied).push(quoted(name));
  }
}

/** The settings a statement sets for the transaction: `SET LOCAL name`, `set_config('name' or $n, …, true)`. */
function settingNamesOf(sql: string, parameters: unknown[] | undefined): string[] {
  const names: string[] = [];
  for (const [, keyword, name] of sql.matchAll(SET_LOCAL)) names.push(keyword ? KEYWORD_SETTINGS[keyword.toUpperCase().replace(/\s+/g, ' ')] : name.toLowerCase());
  for (const call of sql.matchAll(SET_CONFIG)) {
    const [name, , local] = argumentsAt(sql, call.index + call[0].length).map((argument) => valueOf(argument, parameters));
    if (local === false || local === 'false') continue;
    if (typeof name !== 'string' || (local !== true && local !== 'true')) {
      throw new Error(`set_config() with a name or scope the statement does not spell out (a literal or a parameter): the module cannot end it with the app's transaction (${sql.slice(0, 120)}).`);
    }
    names.push(name.toLowerCase());
  }
  return names;
}

/** The top-level arguments of the call whose parenthesis opened just before `from`, as written. */
function argumentsAt(sql: string, from: number): string[] {
  const found: string[] = [];
  let depth = 0;
  let start = from;
  for (let at = from; at < sql.length; at++) {
    const char = sql[at];
    if (char === "'") at = skipQuoted(sql, at);
    else if (char === '(') depth++;
    else if (char === ')' && depth > 0) depth--;
    else if ((char === ',' && depth === 0) || char === ')') {
      found.push(sql.slice(start, at).trim());
      start = at + 1;
      if (char === ')') break;
    }
  }
  return found;
}

/** The index of the quote that closes the string opened at `open` ('' is a quote inside it). */
function skipQuoted(sql: string, open: number): number {
  let at = open + 1;
  while (at < sql.length) {
    if (sql[at] === "'" && sql[at + 1] === "'") at += 2;
    else if (sql[at] === "'") return at;
    else at++;
  }
  return sql.length;
}

/** A literal's text or a parameter's value; undefined for an expression the module cannot read. */
function valueOf(argument: string, parameters: unknown[] | undefined): unknown {
  const match = LITERAL_OR_PARAMETER.exec(argument) ?? /^(true|false)$/i.exec(argument);
  if (!match) return undefined;
  if (match[0].toLowerCase() === 'true' || match[0].toLowerCase() === 'false') return match[0].toLowerCase();
  return match[1] !== undefined ? match[1].replace(/''/g, "'") : parameters?.[Number(match[2]) - 1];
}

/** An identifier as written (quoted), or folded to lower case as PostgreSQL folds it. */
function quoted(name: string): string {
  return name.startsWith('"') ? name : `"${name.toLowerCase()}"`;
}
