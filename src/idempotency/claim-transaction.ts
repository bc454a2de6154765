import type { QueryRunner } from 'typeorm';

/** A statement the module prepares once per connection (a named prepared statement). */
export interface PreparedStatement {
  name: string;
  text: string;
  values: unknown[];
}

interface StatementResult<Row> {
  rows: Row[];
}

/** The node-postgres client under a TypeORM QueryRunner. */
interface PgConnection {
  query<Row>(statement: PreparedStatement | Omit<PreparedStatement, 'name'> | string): Promise<StatementResult<Row>>;
  /** node-postgres's `pipeline` client option. */
  pipeline?: boolean;
  connection?: { stream?: { cork?(): void; uncork?(): void } };
}

/** How the module's statements go to the server. */
interface ClaimTransactionOptions {
  /**
   * Named prepared statements, parsed once per connection. Off, each is sent
   * as an unnamed statement, as under a connection pooler that cannot keep
   * named ones (PgBouncer in transaction mode before 1.21).
   */
  preparedStatements: boolean;
}

/** What TypeORM consults to decide whether `runner.manager` writes need a transaction of their own. */
interface TypeOrmTransactionState {
  isTransactionActive: boolean;
  transactionDepth: number;
}

/**
 * The claim's transaction, driven on the QueryRunner's own pg connection so
 * that the module's statements skip the ORM's query path and are prepared
 * once per connection. On a connection with node-postgres pipelining
 * (`extra: { pipeline: true }`), BEGIN goes out with the claim and the
 * outcome with COMMIT: four round trips in all for a first execution with
 * two business writes, as many as the bare business transaction. Without
 * pipelining the same calls simply run one after another. With
 * `preparedStatements: false` the statements go unnamed, parsed each time.
 *
 * TypeORM's transaction flags are kept in step, so that business writes
 * through `runner.manager` join this transaction (and nested
 * `manager.transaction()` calls become savepoints) instead of starting one.
 */
export class ClaimTransaction {
  private open = false;

  private constructor(
    private readonly runner: QueryRunner,
    private readonly connection: PgConnection,
    private readonly options: ClaimTransactionOptions,
  ) {}

  /** Begins a READ COMMITTED transaction and runs `statements` in it, sent together; `first` is the first one's result. */
  static async begin<Row>(
    runner: QueryRunner,
    options: ClaimTransactionOptions,
    ...statements: Array<PreparedStatement | string>
  ): Promise<{ transaction: ClaimTransaction; first: StatementResult<Row> | undefined }> {
    const connection = (await runner.connect()) as PgConnection;
    const transaction = new ClaimTransaction(runner, connection, options);
    transaction.setOpen(true);
    const settled = await transaction.sendTogether<Row>(['START TRANSACTION ISOLATION LEVEL READ COMMITTED', ...statements]);
    const failure = settled.find((result): result is PromiseRejectedResult => result.status === 'rejected');
    if (failure) {
      await transaction.rollback();
      throw failure.reason;
    }
    return { transaction, first: (settled[1] as PromiseFulfilledResult<StatementResult<Row>> | undefined)?.value };
  }

  query<Row>(statement: PreparedStatement | string): Promise<StatementResult<Row>> {
    return this.connection.query<Row>(this.asSent(statement));
  }

  /** Runs `statement` and COMMIT together; throws, with nothing committed, when the statement fails. */
  async commitWith(statement: PreparedStatement): Promise<void> {
    // Closed before COMMIT is sent, so that no write can queue behind it on this connection and commit on its own.
    this.setOpen(false);
    // After a failed statement PostgreSQL answers COMMIT with a rollback: nothing is kept.
    const [written, committed] = await this.sendTogether([statement, 'COMMIT']);
    if (written.status === 'rejected') throw written.reason;
    if (committed.status === 'rejected') throw committed.reason;
  }

  /** Commits; throws, with nothing committed, when the transaction had failed. */
  async commit(): Promise<void> {
    this.setOpen(false);
    await this.connection.query('COMMIT');
  }

  /** Rolls back if still open; a broken connection is left for the pool to discard. */
  async rollback(): Promise<void> {
    if (!this.open) return;
    this.setOpen(false);
    await this.connection.query('ROLLBACK').catch(() => undefined);
  }

  /**
   * On a pipelined connection, issues the statements without awaiting in
   * between, with the socket corked: one write and one round trip. Otherwise
   * one after another (node-postgres no longer queues queries for a busy
   * client). Every statement runs either way, as PostgreSQL runs a pipeline.
   */
  private async sendTogether<Row>(statements: Array<PreparedStatement | string>): Promise<Array<PromiseSettledResult<StatementResult<Row>>>> {
    if (!this.connection.pipeline) {
      const settled: Array<PromiseSettledResult<StatementResult<Row>>> = [];
      for (const statement of statements) {
        settled.push(await this.query<Row>(statement).then((value) => ({ status: 'fulfilled', value }) as const, (reason: unknown) => ({ status: 'rejected', reason }) as const));
      }
      return settled;
    }
    const stream = this.connection.connection?.stream;
    let sent: Array<Promise<StatementResult<Row>>>;
    stream?.cork?.();
    try {
      sent = statements.map((statement) => this.query<Row>(statement));
    } finally {
      stream?.uncork?.(); // before awaiting: uncorking is what sends them
    }
    return Promise.allSettled(sent);
  }

  /** An unnamed statement, when named ones are off: node-postgres then parses it anew, on any server connection. */
  private asSent(statement: PreparedStatement | string): PreparedStatement | Omit<PreparedStatement, 'name'> | string {
    if (typeof statement === 'string' || this.options.preparedStatements) return statement;
    return { text: statement.text, values: statement.values };
  }

  private setOpen(open: boolean): void {
    this.open = open;
    const state = this.runner as unknown as TypeOrmTransactionState;
    state.isTransactionActive = open;
    state.transactionDepth = open ? 1 : 0;
  }
}
