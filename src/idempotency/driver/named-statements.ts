import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { IdempotencyDataSource } from '../transactions/idempotency-data-source.js';
import type { ResolvedModuleOptions } from '../options/idempotency.options.js';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../options/idempotency.tokens.js';
import { type PgPool, pgPoolOf } from './pg-pool.js';

/** "prepared statement … does not exist", "prepared statement … already exists": a named statement met another server connection. */
const LOST_NAMED_STATEMENT = new Set(['26000', '42P05']);

const logger = new Logger('Idempotency');

interface PgPoolClient {
  query(statement: string | { name: string; text: string; values: unknown[] }): Promise<unknown>;
  release(): void;
  /** The server process the connection was opened to, from its BackendKeyData. */
  processID: number | null;
}

interface PidResult {
  rows: Array<{ pid: number }>;
}

interface PreparedResult {
  rows: Array<{ name: string; statement: string }>;
}

/**
 * Whether the error says a named prepared statement went missing, or met a
 * namesake, on the server: what a pooler in transaction mode that does not
 * track prepared statements (PgBouncer before 1.21, or with
 * `max_prepared_statements = 0`) does to them.
 */
export function isNamedStatementLost(error: unknown): boolean {
  const failure = (error as { driverError?: { code?: unknown } }).driverError ?? (error as { code?: unknown });
  return typeof failure?.code === 'string' && LOST_NAMED_STATEMENT.has(failure.code);
}

/** A node-postgres client, as far as telling who lost its prepared statements goes. */
interface PreparingClient {
  query(sql: string): Promise<unknown>;
  /** The server process the connection was opened to, from its BackendKeyData. */
  processID?: number | null;
  /** What node-postgres believes it prepared on the connection: it sends those by name only. */
  connection?: { parsedStatements?: Record<string, string> };
}

/**
 * Forgets what `client` believes it prepared on its connection, all of it or
 * the statements `names` names: each is prepared again at its next use. For
 * a connection whose prepared statements the app's code dropped
 * (DEALLOCATE, DISCARD ALL).
 */
export function forgetPrepared(client: unknown, names: 'all' | readonly string[] = 'all'): void {
  const connection = (client as PreparingClient | undefined)?.connection;
  if (!connection?.parsedStatements) return;
  if (names === 'all') connection.parsedStatements = {};
  else for (const name of names) delete connection.parsedStatements[name];
}

/**
 * After a named statement was lost on `client` (its transaction rolled
 * back), finds out who lost it. Where the connection still reaches the
 * server process it was opened to, the app's code dropped prepared
 * statements, or some that node-postgres had forgotten are still there: what
 * it believes it prepared is set to what the server holds
 * (`pg_prepared_statements`), so that each is prepared again only if it is
 * gone. Otherwise a pooler sits between, and named statements are off from
 * now on (`unnamedAfter`). Either way, the statement goes through when sent
 * again.
 */
export async function afterLostStatement(client: PreparingClient, error: unknown, options: { preparedStatements: boolean }): Promise<void> {
  const answer = (await client.query('SELECT pg_backend_pid() AS pid').catch(() => undefined)) as PidResult | undefined;
  const pid = answer?.rows[0]?.pid;
  if (pid === undefined || pid !== client.processID) return unnamedAfter(error, options);
  const held = (await client.query('SELECT name, statement FROM pg_prepared_statements').catch(() => undefined)) as PreparedResult | undefined;
  const connection = client.connection;
  if (!held || !connection?.parsedStatements) return forgetPrepared(client);
  connection.parsedStatements = Object.fromEntries(held.rows.map(({ name, statement }) => [name, statement]));
}

/**
 * Turns named statements off for the rest of the process when `error` shows
 * the connection path loses them; says so once, naming the option.
 */
export function unnamedAfter(error: unknown, options: { preparedStatements: boolean }): void {
  if (!options.preparedStatements || !isNamedStatementLost(error)) return;
  options.preparedStatements = false;
  logger.warn(
    `A named prepared statement was lost between transactions of one connection (${(error as Error).message}): a pooler in transaction mode, such as PgBouncer before 1.21, ` +
      `sits between the app and PostgreSQL. The module sends its statements unnamed from now on; set preparedStatements: false to start that way.`,
  );
}

/**
 * At startup, finds out whether the module's named prepared statements
 * survive the way to the database, and turns them off when they do not:
 * behind PgBouncer in transaction mode without prepared-statement support,
 * a statement prepared in one transaction is missing in the next one that
 * lands on another server connection, and requests would fail now and then,
 * which is the hardest failure to see in production.
 *
 * The probe prepares a statement of a name of its own in a transaction of one
 * connection and reads the server process it ran on. When that is the
 * process the connection was opened to, the app talks to PostgreSQL itself,
 * and a statement lives as long as its connection. Otherwise a pooler sits
 * between: the probe holds transactions open on other connections, one more
 * at a time, until a transaction of the first lands on another server
 * process, and runs the statement there. Behind a pooler that keeps
 * prepared statements it runs; otherwise it fails with SQLSTATE 26000. A
 * probe that cannot decide changes nothing, and a statement lost later
 * still turns them off (`unnamedAfter`).
 */
@Injectable()
export class NamedStatementsProbe implements OnModuleInit {
  constructor(
    private readonly served: IdempotencyDataSource,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedModuleOptions,
  ) {}

  async onModuleInit(): Promise<void> {
    if (!this.options.preparedStatements || this.options.claimDriver !== 'pg') return;
    const pool = pgPoolOf<PgPoolClient>(this.served.dataSource);
    // Two connections at once: a pool of one would have the probe wait for itself.
    const size = pool?.options?.max ?? 10;
    if (typeof pool?.connect !== 'function' || size < 2) return;
    const lost = await probe(pool as Pick<PgPool<PgPoolClient>, 'connect'>, Math.min(size - 1, MOST_HELD)).catch(() => undefined);
    if (lost) unnamedAfter(lost, this.options);
  }
}

/**
 * The most transactions the probe holds open at once. A pooler hands a new
 * transaction the server connection freed most recently (PgBouncer's
 * default), so one held transaction usually takes the first's server
 * connection; each further one covers a connection that some other work
 * freed in between.
 */
const MOST_HELD = 4;

/** The error of a named statement run again on another server process; undefined when it ran, or when no other process was reached. */
async function probe(pool: Pick<PgPool<PgPoolClient>, 'connect'>, mostHeld: number): Promise<unknown> {
  const first = await pool.connect();
  const held: PgPoolClient[] = [];
  // A name of its own, and none of the module's: nothing else ever runs it.
  const statement = { name: `named-statements-probe-${randomBytes(6).toString('hex')}`, text: 'SELECT pg_backend_pid() AS pid', values: [] };
  const serverProcess = async () => ((await first.query('SELECT pg_backend_pid() AS pid')) as PidResult).rows[0].pid;
  try {
    await first.query('BEGIN');
    const prepared = ((await first.query(statement)) as PidResult).rows[0].pid;
    await first.query('COMMIT');
    // The process the server named when the connection opened: a pooler names one of its own.
    if (first.processID === prepared) return undefined;
    while (held.length < mostHeld) {
      const other = await pool.connect();
      held.push(other);
      await other.query('BEGIN');
      await other.query('SELECT 1');
      await first.query('BEGIN');
      try {
        if ((await serverProcess()) === prepared) continue;
        await first.query(statement);
        return undefined;
      } catch (error) {
        return error;
      } finally {
        await first.query('ROLLBACK').catch(() => undefined);
      }
    }
    return undefined;
  } finally {
    for (const other of held) {
      await other.query('ROLLBACK').catch(() => undefined);
      other.release();
    }
    await first.query(`DEALLOCATE "${statement.name}"`).catch(() => undefined);
    first.release();
  }
}
