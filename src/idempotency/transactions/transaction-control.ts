import { type IsolationLevel, isolationLevelOf } from '../options/idempotency.options.js';

/**
 * What a statement of the app's code does beyond running in the request's
 * transaction, read from its text before it is sent:
 *
 * - `begin`, `commit`, `rollback`: it starts or ends a transaction, which
 *   inside the request becomes a savepoint of the request's transaction
 *   (see `UserTransactions`);
 * - `refused`: it would end or escape the request's transaction, or cannot
 *   run inside one, and is never sent;
 * - `session`: it runs as it is, and changes what the module's own
 *   statements rely on: the role they run as, or the connection's prepared
 *   statements.
 *
 * Undefined for every other statement: the cheap answer most get.
 */
export type StatementEffect =
  | { kind: 'begin'; isolation?: IsolationLevel; readOnly: boolean }
  | { kind: 'commit' | 'rollback'; chain: boolean; spelled: string }
  | { kind: 'refused'; reason: string }
  | { kind: 'session'; identity: boolean; preparedStatements: boolean };

/** The first keywords of a statement, after any comments. */
const LEADING_WORDS = /^(?:\s+|--[^\n]*(?:\n|$)|\/\*[\s\S]*?\*\/)*([A-Za-z]+)(?:\s+([A-Za-z]+))?(?:\s+([A-Za-z]+))?/;
/** First words that may matter; every other statement is answered at once. */
const WATCHED = new Set(['BEGIN', 'START', 'COMMIT', 'END', 'ROLLBACK', 'ABORT', 'PREPARE', 'SET', 'RESET', 'DISCARD', 'DEALLOCATE']);
const ISOLATION = /ISOLATION\s+LEVEL\s+(READ\s+UNCOMMITTED|READ\s+COMMITTED|REPEATABLE\s+READ|SERIALIZABLE)/i;
const READ_ONLY = /\bREAD\s+ONLY\b/i;
const AND_CHAIN = /\bAND\s+CHAIN\s*;?\s*$/i;

const OUTSIDE = 'Run it in a transaction of its own: TransactionHost.outside(() => dataSource.query(…)), which commits apart from the recorded outcome.';

/** What `sql` does to the transaction it runs in (see `StatementEffect`). */
export function effectOf(sql: unknown): StatementEffect | undefined {
  if (typeof sql !== 'string') return undefined;
  const statements = sql.includes(';') ? splitStatements(sql) : [sql];
  if (statements.length === 1) return effectOfOne(statements[0]);
  let session: Extract<StatementEffect, { kind: 'session' }> | undefined;
  for (const statement of statements) {
    const effect = effectOfOne(statement);
    if (!effect) continue;
    if (effect.kind === 'refused') return effect;
    if (effect.kind !== 'session') {
      return {
        kind: 'refused',
        reason:
          `A query of several statements that starts or ends a transaction (${statement.trim().slice(0, 40)}): inside an @Idempotent() request each transaction ` +
          'the app starts becomes a savepoint of the request’s, and the module turns BEGIN, COMMIT and ROLLBACK into savepoint commands only when each is a query of its own. Send them as separate queries.',
      };
    }
    session = { kind: 'session', identity: (session?.identity ?? false) || effect.identity, preparedStatements: (session?.preparedStatements ?? false) || effect.preparedStatements };
  }
  return session;
}

function effectOfOne(sql: string): StatementEffect | undefined {
  const words = LEADING_WORDS.exec(sql);
  if (!words) return undefined;
  const first = words[1].toUpperCase();
  if (!WATCHED.has(first)) return undefined;
  const second = words[2]?.toUpperCase();
  const third = words[3]?.toUpperCase();
  switch (first) {
    case 'BEGIN':
    case 'START':
      if (first === 'START' && second !== 'TRANSACTION') return undefined;
      return beginOf(sql);
    case 'COMMIT':
    case 'END':
      if (second === 'PREPARED') return refused('COMMIT PREPARED', 'cannot run inside a transaction block, and inside an @Idempotent() request every statement does.');
      return { kind: 'commit', chain: AND_CHAIN.test(sql), spelled: first };
    case 'ROLLBACK':
    case 'ABORT':
      if (second === 'PREPARED') return refused('ROLLBACK PREPARED', 'cannot run inside a transaction block, and inside an @Idempotent() request every statement does.');
      // ROLLBACK [WORK | TRANSACTION] TO [SAVEPOINT] name is the app's own savepoint, and runs as it is.
      if (second === 'TO' || ((second === 'WORK' || second === 'TRANSACTION') && third === 'TO')) return undefined;
      return { kind: 'rollback', chain: AND_CHAIN.test(sql), spelled: first };
    case 'PREPARE':
      if (second !== 'TRANSACTION') return undefined;
      return refused('PREPARE TRANSACTION', 'would prepare the request’s whole transaction, its claim included, for a two-phase commit and take it off the connection.');
    case 'SET':
      if (second === 'TRANSACTION' && third === 'SNAPSHOT') {
        return refused('SET TRANSACTION SNAPSHOT', 'must come before any query of its transaction, and inside an @Idempotent() request the request’s transaction has begun.');
      }
      return identityOf(second, third) ? { kind: 'session', identity: true, preparedStatements: false } : undefined;
    case 'RESET':
      return second === 'ROLE' || second === 'ALL' || (second === 'SESSION' && third === 'AUTHORIZATION') ? { kind: 'session', identity: true, preparedStatements: false } : undefined;
    case 'DISCARD':
      // DISCARD PLANS, SEQUENCES and TEMP run in a transaction block; ALL does not.
      if (second !== 'ALL') return undefined;
      return refused('DISCARD ALL', 'cannot run inside a transaction block, and inside an @Idempotent() request every statement does.');
    case 'DEALLOCATE':
      return { kind: 'session', identity: false, preparedStatements: true };
  }
  return undefined;
}

/** SET [SESSION | LOCAL] ROLE …, SET [SESSION | LOCAL] SESSION AUTHORIZATION …: the role the connection's statements run as. */
function identityOf(second: string | undefined, third: string | undefined): boolean {
  if (second === 'ROLE') return true;
  if (second === 'SESSION') return third === 'ROLE' || third === 'AUTHORIZATION';
  if (second === 'LOCAL') return third === 'ROLE' || third === 'SESSION';
  return false;
}

function beginOf(sql: string): StatementEffect {
  const isolation = ISOLATION.exec(sql);
  return { kind: 'begin', isolation: isolation ? isolationLevelOf(isolation[1].replace(/\s+/g, ' ')) : undefined, readOnly: READ_ONLY.test(sql) };
}

function refused(statement: string, why: string): StatementEffect {
  return { kind: 'refused', reason: `${statement} ${why} ${OUTSIDE}` };
}

/**
 * The statements of a query of several, split at the semicolons outside
 * literals, quoted identifiers, dollar quotes and comments; empty ones
 * left out.
 */
export function splitStatements(sql: string): string[] {
  const statements: string[] = [];
  let start = 0;
  let at = 0;
  while (at < sql.length) {
    const char = sql[at];
    const next = sql[at + 1];
    if (char === "'" || char === '"') at = closing(sql, at, char);
    else if (char === '-' && next === '-') at = lineEnd(sql, at);
    else if (char === '/' && next === '*') at = commentEnd(sql, at);
    else if (char === '$') at = dollarQuoteEnd(sql, at);
    else if (char === ';') {
      statements.push(sql.slice(start, at));
      start = at + 1;
    }
    at++;
  }
  statements.push(sql.slice(start));
  return statements.filter((statement) => statement.trim() !== '');
}

/** The index of the quote closing the one at `open` (a doubled quote stays inside). */
function closing(sql: string, open: number, quote: string): number {
  let at = open + 1;
  while (at < sql.length) {
    if (sql[at] === quote && sql[at + 1] === quote) at += 2;
    else if (sql[at] === quote) return at;
    else at++;
  }
  return sql.length;
}

function lineEnd(sql: string, from: number): number {
  const end = sql.indexOf('\n', from);
  return end === -1 ? sql.length : end;
}

/** The end of a block comment, which PostgreSQL lets nest. */
function commentEnd(sql: string, open: number): number {
  let depth = 0;
  for (let at = open; at < sql.length - 1; at++) {
    if (sql[at] === '/' && sql[at + 1] === '*') {
      depth++;
      at++;
    } else if (sql[at] === '*' && sql[at + 1] === '/') {
      depth--;
      at++;
      if (depth === 0) return at;
    }
  }
  return sql.length;
}

/** The end of a dollar-quoted string opened at `open` ($$ or $tag$); a parameter ($1) is no quote. */
function dollarQuoteEnd(sql: string, open: number): number {
  const tag = /^\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$/.exec(sql.slice(open));
  if (!tag) return open;
  const end = sql.indexOf(tag[0], open + tag[0].length);
  return end === -1 ? sql.length : end + tag[0].length - 1;
}
