import type { QueryRunner } from 'typeorm';
import type { PreparedStatement, Statement } from '../records/record.statements.js';
import { endedByIdleTimeout, watchErrorMessages } from './idle-session-timeout.js';
import { sqlStateOf } from './database-errors.js';
import { afterLostStatement, forgetPrepared, isNamedStatementLost } from './named-statements.js';
import type { IsolationLevel } from '../options/idempotency.options.js';
import { settleInTurn, type StatementResult, type TransactionDriver, type TransactionStatement } from './transaction-driver.js';
import { type RunnerState, runnerState } from '../transactions/typeorm-internals.js';

/** BEGIN at each level, spelt once. */
const BEGIN: Readonly<Record<IsolationLevel, string>> = {
  'READ COMMITTED': 'START TRANSACTION ISOLATION LEVEL READ COMMITTED',
  'REPEATABLE READ': 'START TRANSACTION ISOLATION LEVEL REPEATABLE READ',
  SERIALIZABLE: 'START TRANSACTION ISOLATION LEVEL SERIALIZABLE',
};

/**
 * The module's statements run as the connection's own role (`SET ROLE
 * NONE` for the transaction), the app's role kept aside; and the app's
 * role back, for the handler.
 */
const AS_CONNECTION_ROLE = "SELECT set_config('idempotency.app_role', current_setting('role'), true), set_config('role', 'none', true)";
const AS_APP_ROLE = "SELECT set_config('role', current_setting('idempotency.app_role'), true)";
const INSUFFICIENT_PRIVILEGE = '42501';

/** The node-postgres client under a TypeORM QueryRunner (`runner.connect()`), as far as this driver uses it. */
export interface PgClient {
  /** Takes the object form `{ name, text, values }`: a named statement is parsed once per connection. */
  query<Row>(statement: PreparedStatement | Statement | string): Promise<StatementResult<Row>>;
  /** node-postgres's `pipeline` client option (`extra: { pipeline: true }`). */
  pipeline?: boolean;
  /** The server process the connection was opened to. */
  processID?: number | null;
  connection?: { stream?: { cork?(): void; uncork?(): void }; parsedStatements?: Record<string, string> };
}

/** node-postgres's `Query` (`Client.Query`), as far as a statement built on it is sent: `client.query(query)` submits it as it is. */
interface PgQuery {
  name?: string;
  callback?: (error: Error | null, result: StatementResult<unknown>) => void;
}
type PgQueryClass = new (text: string, values?: unknown[]) => PgQuery;

/** How the pg driver sends the module's statements. */
export interface PgClientDriverOptions {
  /** Named prepared statements; off, each is sent unnamed, as under a pooler that cannot keep named ones. */
  preparedStatements: boolean;
}

/**
 * The claim's transaction driven on the QueryRunner's own pg client, so that
 * the module's statements skip the ORM's query path and are prepared once
 * per connection. On a connection with node-postgres pipelining
 * (`extra: { pipeline: true }`), BEGIN goes out with the claim, and the
 * outcome with COMMIT: a first execution takes as many round trips as the
 * bare business transaction. Without pipelining the same calls simply run
 * one after another.
 *
 * TypeORM's transaction flags are set by hand, since TypeORM never sees the
 * BEGIN: business writes through `runner.manager` then join this
 * transaction instead of starting one.
 */
export class PgClientDriver implements TransactionDriver {
  /** The client's connection tells a session the server ended for idling (see idle-session-timeout.ts). */
  private readonly watched: boolean;

  constructor(
    private readonly runner: QueryRunner,
    private readonly client: PgClient,
    private readonly options: PgClientDriverOptions,
  ) {
    this.watched = watchErrorMessages(client);
  }

  /**
   * Why this driver cannot drive `client` under `runner`, or undefined when
   * it can: the internals it relies on must be there, or it would break the
   * join or the pipeline silently.
   */
  static unfitFor(runner: QueryRunner, client: unknown): string | undefined {
    const pg = client as Partial<PgClient> | undefined;
    const state: Partial<RunnerState> = runnerState(runner);
    if (typeof pg?.query !== 'function') return 'the QueryRunner’s connection is not a node-postgres client';
    const stream = pg.connection?.stream;
    if (pg.pipeline && (typeof stream?.cork !== 'function' || typeof stream.uncork !== 'function')) return 'the pipelined client’s socket cannot be corked';
    if (typeof state.isTransactionActive !== 'boolean' || typeof state.transactionDepth !== 'number') {
      return 'the QueryRunner has no isTransactionActive and transactionDepth flags';
    }
    return undefined;
  }

  async begin<Row>(isolation: IsolationLevel, statements: TransactionStatement[]): Promise<Array<PromiseSettledResult<StatementResult<Row>>>> {
    this.setTypeOrmState(true);
    let [begun, ...settled] = await this.beginWith<Row>(isolation, statements);
    // Nothing ran yet: a statement that failed for what the app's code did to the connection before goes once more.
    if (begun.status === 'fulfilled' && (await this.mended(settled))) [begun, ...settled] = await this.beginWith<Row>(isolation, statements);
    // Without BEGIN, a claim that succeeded would have committed on its own: the caller rolls back what it can.
    if (begun.status === 'rejected') throw begun.reason;
    return settled;
  }

  private async beginWith<Row>(isolation: IsolationLevel, statements: TransactionStatement[]): Promise<Array<PromiseSettledResult<StatementResult<Row>>>> {
    if (!this.asConnectionRole) return this.queryTogether<Row>([BEGIN[isolation], ...statements]);
    const [begun, , ...rest] = await this.queryTogether<Row>([BEGIN[isolation], AS_CONNECTION_ROLE, ...statements, AS_APP_ROLE]);
    return [begun, ...rest.slice(0, -1)];
  }

  /**
   * After BEGIN's statements failed for the connection's session state,
   * rolls back and mends it for a second try: a named statement the app's
   * code dropped is prepared again (or a pooler's loss turns named ones
   * off, see `afterLostStatement`); a role the app's code left on the
   * connection (a `SET ROLE` outside any request) is set aside for the
   * module's statements, which run as the connection's own role. Answers
   * whether to try again.
   */
  private async mended(settled: Array<PromiseSettledResult<unknown>>): Promise<boolean> {
    const lost = this.lost;
    this.lost = undefined;
    const refused = !this.asConnectionRole && settled.some((result) => result.status === 'rejected' && sqlStateOf(result.reason) === INSUFFICIENT_PRIVILEGE);
    if (!lost && !refused) return false;
    await this.client.query('ROLLBACK');
    if (lost) await afterLostStatement(this.client, lost, this.options);
    this.asConnectionRole ||= refused;
    return true;
  }

  /** The module's statements run as the connection's own role, the app's code having left another on it. */
  private asConnectionRole = false;

  query<Row>(statement: TransactionStatement): Promise<StatementResult<Row>> {
    if (this.asConnectionRole) return this.queryTogether<Row>([AS_CONNECTION_ROLE, statement, AS_APP_ROLE]).then(([, sent]) => (sent.status === 'fulfilled' ? sent.value : Promise.reject(sent.reason)));
    return this.send<Row>(statement);
  }

  async commit<Row>(last: PreparedStatement): Promise<StatementResult<Row>> {
    // Closed before COMMIT is sent, so that no write can queue behind it on this connection and commit on its own.
    this.setTypeOrmState(false);
    // After a failed statement PostgreSQL answers COMMIT with a rollback: nothing is kept.
    const [written, committed] = this.asConnectionRole ? (await this.queryTogether<Row>([AS_CONNECTION_ROLE, last, 'COMMIT'])).slice(1) : await this.queryTogether<Row>([last, 'COMMIT']);
    if (written.status === 'rejected') {
      await this.afterLoss();
      throw written.reason;
    }
    if (committed.status === 'rejected') throw committed.reason;
    return written.value;
  }

  async rollback(): Promise<void> {
    this.setTypeOrmState(false);
    await this.send('ROLLBACK').catch(() => undefined);
    await this.afterLoss();
  }

  /** A statement lost later than BEGIN cannot be sent again in its transaction; the next transaction on this connection can. */
  private async afterLoss(): Promise<void> {
    const lost = this.lost;
    this.lost = undefined;
    if (lost) await afterLostStatement(this.client, lost, this.options);
  }

  readonly firesTypeOrmEvents = false;

  get pipelined(): boolean {
    return Boolean(this.client.pipeline);
  }

  get endedByIdleTimeout(): boolean | undefined {
    return this.watched ? endedByIdleTimeout(this.client) : undefined;
  }

  /**
   * Into the socket at once; on a pipelined connection it waits, corked,
   * for the caller's next statement to join it in one write (statements
   * sent this turn of the event loop leave together).
   */
  enqueue(sql: string): Promise<unknown> {
    if (!this.client.pipeline) return this.client.query(sql);
    const stream = this.client.connection!.stream!;
    stream.cork!();
    const sent = this.client.query(sql);
    setImmediate(() => stream.uncork!());
    return sent;
  }

  /**
   * On a pipelined connection, issues the statements without awaiting in
   * between, with the socket corked: one write and one round trip. Otherwise
   * one after another (node-postgres no longer queues queries for a busy
   * client). Every statement runs either way, as PostgreSQL runs a pipeline.
   */
  async queryTogether<Row>(statements: TransactionStatement[]): Promise<Array<PromiseSettledResult<StatementResult<Row>>>> {
    if (!this.client.pipeline) {
      return settleInTurn(statements, (statement) => this.send<Row>(statement));
    }
    const stream = this.client.connection!.stream!;
    let sent: Array<Promise<StatementResult<Row>>>;
    stream.cork!();
    try {
      sent = statements.map((statement) => this.send<Row>(statement));
    } finally {
      stream.uncork!(); // before awaiting: uncorking is what sends them
    }
    return Promise.allSettled(sent);
  }

  /**
   * Sends a statement as `preparedStatements` says. A named one that went
   * missing is noted: once its transaction has rolled back, the connection
   * tells whether the app's code dropped it or a pooler lost it (see
   * `afterLostStatement`).
   */
  private send<Row>(statement: TransactionStatement): Promise<StatementResult<Row>> {
    return this.submit<Row>(this.asSent(statement)).catch((error: unknown) => {
      if (isNamedStatementLost(error)) this.lost ??= error;
      throw error;
    });
  }

  /**
   * A statement with parameters, built as node-postgres's `Query` from its
   * text: `client.query()` copies a config object descriptor by descriptor
   * before it builds one (pg 8's `cloneQueryConfig`), a microsecond and four
   * objects of garbage per statement, and wraps its promise in one more.
   */
  private submit<Row>(statement: TransactionStatement | Statement): Promise<StatementResult<Row>> {
    // pg's `Query` class, where the client has one (pg-native's has none).
    const Query = (this.client.constructor as { Query?: PgQueryClass }).Query;
    if (typeof statement === 'string' || !Query) return this.client.query<Row>(statement);
    const query = new Query(statement.text, statement.values);
    if ('name' in statement) query.name = statement.name;
    return new Promise<StatementResult<Row>>((resolve, reject) => {
      query.callback = (error, result) => (error ? reject(error) : resolve(result as StatementResult<Row>));
      this.client.query(query as unknown as Statement);
    });
  }

  /** The first named statement found missing in this transaction. */
  private lost?: unknown;

  forgetPreparedStatements(names: 'all' | readonly string[]): void {
    forgetPrepared(this.client, names);
  }

  /** An unnamed statement, when named ones are off: node-postgres then parses it anew, on any server connection. */
  private asSent(statement: TransactionStatement): TransactionStatement | Statement {
    if (typeof statement === 'string' || this.options.preparedStatements) return statement;
    return { text: statement.text, values: statement.values };
  }

  private setTypeOrmState(open: boolean): void {
    // What TypeORM consults to decide whether `runner.manager` writes need a transaction of their own.
    const state = runnerState(this.runner);
    state.isTransactionActive = open;
    state.transactionDepth = open ? 1 : 0;
  }
}
