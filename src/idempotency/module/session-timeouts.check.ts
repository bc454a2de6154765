import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { IdleSessionTimeout } from '../driver/idle-session-timeout.js';
import { IdempotencyDataSource } from '../transactions/idempotency-data-source.js';

/** The setting as shown, and in ms: it reads back in its own units ('0', '1s', '5min'), each a valid interval. */
const READ_IDLE_TIMEOUT = `SELECT current_setting('idle_in_transaction_session_timeout') AS shown,
  date_part('epoch', current_setting('idle_in_transaction_session_timeout')::interval) * 1000 AS ms`;

/**
 * At startup, reads `idle_in_transaction_session_timeout` on a connection of
 * the served DataSource (where the server, the database, the role or the
 * connection's options set it), and warns once when it is on. A request's
 * transaction stays open for as long as its handler runs; PostgreSQL ends
 * the session of one whose handler waits longer than that between two
 * statements (an external call), and that request answers 503 on every
 * retry. The value is kept for that 503's detail.
 */
@Injectable()
export class SessionTimeoutsCheck implements OnModuleInit {
  constructor(
    private readonly served: IdempotencyDataSource,
    private readonly idle: IdleSessionTimeout,
  ) {}

  async onModuleInit(): Promise<void> {
    const dataSource = this.served.dataSource;
    // IdempotencySchemaCheck says what to do about a DataSource that is not initialised.
    if (!dataSource.isInitialized) return;
    // Startup hooks run at once: one that cannot read leaves the database's faults to IdempotencySchemaCheck, which retries.
    const [setting]: Array<{ shown: string; ms: number }> = await dataSource.query(READ_IDLE_TIMEOUT).catch(() => []);
    if (!setting || setting.ms <= 0) return;
    const { shown, ms } = setting;
    this.idle.shown = shown;
    this.idle.ms = ms;
    new Logger('Idempotency').warn(
      `idle_in_transaction_session_timeout is ${shown} on the served DataSource's connections: PostgreSQL ends the session of an @Idempotent() request ` +
        `whose handler spends longer than that between two statements (an external call), since the request's transaction stays open while it runs, ` +
        `and the request answers 503 on every retry. Raise or unset it for the app's role or database ` +
        `(ALTER ROLE … RESET idle_in_transaction_session_timeout), or move slow external calls into phased operations, @Idempotent({ phases: true }): see "External side effects" in the documentation (docs/side-effects.md).`,
    );
  }
}
