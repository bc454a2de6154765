import type { IsolationLevel } from '../options/idempotency.options.js';
import { asciiUpperCase, firstWord, type ScannedStatement, scanStatements } from './statement-scanner.js';

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
  | { kind: 'session'; identity: boolean; preparedStatements: Deallocated };

/** The prepared statements a statement drops from the connection: none, all, or those named. */
export type Deallocated = false | 'all' | string[];

/** First words that may matter; every other statement is answered at once. */
const WATCHED = new Set(['BEGIN', 'START', 'COMMIT', 'END', 'ROLLBACK', 'ABORT', 'PREPARE', 'SET', 'RESET', 'DISCARD', 'DEALLOCATE']);
const ISOLATION_LEVELS: Record<string, IsolationLevel> = {
  'READ UNCOMMITTED': 'READ COMMITTED',
  'READ COMMITTED': 'READ COMMITTED',
  'REPEATABLE READ': 'REPEATABLE READ',
  SERIALIZABLE: 'SERIALIZABLE',
};

const OUTSIDE = 'Run it in a transaction of its own: IdempotencyTransactionHost.outside(() => dataSource.query(…)), which commits apart from the recorded outcome.';

/** The text of a statement as node-postgres takes it: a string, or an object that carries it (a query config, a cursor, a COPY stream). */
export function statementText(query: unknown): string | undefined {
  if (typeof query === 'string') return query;
  const text = (query as { text?: unknown } | null | undefined)?.text;
  return typeof text === 'string' ? text : undefined;
}

/**
 * What `query` does to the transaction it runs in (see `StatementEffect`),
 * read as PostgreSQL's scanner reads it (`scanStatements`). A query whose
 * reading depends on `standard_conforming_strings` (a backslash in a
 * literal) is read both ways, and refused where the two differ.
 */
export function effectOf(query: unknown): StatementEffect | undefined {
  const sql = statementText(query);
  if (sql === undefined) return undefined;
  // Without a semicolon a query is one statement, and its first word says whether it matters: the cheap answer most get.
  if (!sql.includes(';')) {
    const word = firstWord(sql);
    const first = word === undefined ? undefined : asciiUpperCase(word);
    if (first === undefined || !WATCHED.has(first)) return undefined;
  }
  const effect = effectOfAll(scanStatements(sql, false));
  if (!sql.includes('\\')) return effect;
  const escaped = effectOfAll(scanStatements(sql, true));
  if (JSON.stringify(effect) === JSON.stringify(escaped)) return effect;
  return refused(
    JSON.stringify(sql.trim().slice(0, 40)),
    'reads as other statements with standard_conforming_strings off (a backslash escaping a quote) than with it on, and one of the readings starts or ends a transaction. Write the literal as E\'…\', or without the backslash.',
  );
}

function effectOfAll(statements: ScannedStatement[]): StatementEffect | undefined {
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
          `A query of several statements that starts or ends a transaction (${JSON.stringify(statement.text.trim().slice(0, 40))}): inside an @Idempotent() request each transaction ` +
          'the app starts becomes a savepoint of the request’s, and the module turns BEGIN, COMMIT and ROLLBACK into savepoint commands only when each is a query of its own. Send them as separate queries.',
      };
    }
    session = {
      kind: 'session',
      identity: (session?.identity ?? false) || effect.identity,
      preparedStatements: mergedDeallocations(session?.preparedStatements ?? false, effect.preparedStatements),
    };
  }
  return session;
}

function mergedDeallocations(a: Deallocated, b: Deallocated): Deallocated {
  if (a === 'all' || b === 'all') return 'all';
  if (a === false) return b;
  if (b === false) return a;
  return [...a, ...b];
}

function effectOfOne({ words }: ScannedStatement): StatementEffect | undefined {
  const word = (at: number) => (words[at] === undefined || words[at].startsWith('"') ? undefined : asciiUpperCase(words[at]));
  const first = word(0);
  if (first === undefined || !WATCHED.has(first)) return undefined;
  const second = word(1);
  const third = word(2);
  switch (first) {
    case 'BEGIN':
    case 'START':
      if (first === 'START' && second !== 'TRANSACTION') return undefined;
      return beginOf(words.map((_, at) => word(at)));
    case 'COMMIT':
    case 'END':
      if (second === 'PREPARED') return refused('COMMIT PREPARED', 'cannot run inside a transaction block, and inside an @Idempotent() request every statement does.');
      return { kind: 'commit', chain: chained(words), spelled: first };
    case 'ROLLBACK':
    case 'ABORT':
      if (second === 'PREPARED') return refused('ROLLBACK PREPARED', 'cannot run inside a transaction block, and inside an @Idempotent() request every statement does.');
      // ROLLBACK [WORK | TRANSACTION] TO [SAVEPOINT] name is the app's own savepoint, and runs as it is.
      if (second === 'TO' || ((second === 'WORK' || second === 'TRANSACTION') && third === 'TO')) return undefined;
      return { kind: 'rollback', chain: chained(words), spelled: first };
    case 'PREPARE':
      // PREPARE TRANSACTION 'id'; `PREPARE transaction AS …` names a statement.
      if (second !== 'TRANSACTION' || words.length > 2) return undefined;
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
      return { kind: 'session', identity: false, preparedStatements: deallocated(words) };
  }
  return undefined;
}

/** `DEALLOCATE [PREPARE] { name | ALL }`: the statement's name as PostgreSQL names it (unquoted, folded to lower case), or all. */
function deallocated(words: string[]): Deallocated {
  const name = words[1] !== undefined && asciiUpperCase(words[1]) === 'PREPARE' ? words[2] : words[1];
  if (name === undefined) return false;
  if (name.startsWith('"')) return [name.slice(1)];
  return asciiUpperCase(name) === 'ALL' ? 'all' : [name.replace(/[A-Z]+/g, (letters) => letters.toLowerCase())];
}

/** Ends with AND CHAIN (not AND NO CHAIN). */
function chained(words: string[]): boolean {
  return words.length >= 2 && asciiUpperCase(words[words.length - 2]) === 'AND' && asciiUpperCase(words[words.length - 1]) === 'CHAIN';
}

/** SET [SESSION | LOCAL] ROLE …, SET [SESSION | LOCAL] SESSION AUTHORIZATION …: the role the connection's statements run as. */
function identityOf(second: string | undefined, third: string | undefined): boolean {
  if (second === 'ROLE') return true;
  if (second === 'SESSION') return third === 'ROLE' || third === 'AUTHORIZATION';
  if (second === 'LOCAL') return third === 'ROLE' || third === 'SESSION';
  return false;
}

/** BEGIN or START TRANSACTION, with the isolation level and READ ONLY it asks for; `words` upper-cased, quoted names undefined. */
function beginOf(words: Array<string | undefined>): StatementEffect {
  let isolation: IsolationLevel | undefined;
  let readOnly = false;
  for (let at = 0; at < words.length; at++) {
    if (words[at] === 'ISOLATION' && words[at + 1] === 'LEVEL') {
      isolation = ISOLATION_LEVELS[words[at + 2] ?? ''] ?? ISOLATION_LEVELS[`${words[at + 2]} ${words[at + 3]}`] ?? isolation;
    }
    if (words[at] === 'READ' && words[at + 1] === 'ONLY') readOnly = true;
  }
  return { kind: 'begin', isolation, readOnly };
}

function refused(statement: string, why: string): StatementEffect {
  return { kind: 'refused', reason: `${statement} ${why} ${OUTSIDE}` };
}
