import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { IdleSessionTimeout } from '../driver/idle-session-timeout.js';
import { IdempotencyDataSource } from '../transactions/idempotency-data-source.js';

/** The setting as shown, and in ms: it reads back in its own units ('0', '1s', '5min'), each a valid interval. */
const READ_IDLE_TIMEOUT = `SELECT current_setting('idle_in_transaction_session_timeout') AS shown,
  date_part('epoch', current_setting('idle_in_transaction_session_timeout')::interval) * 1000 AS ms`;

/**
 * The settings of the served connections' session, and the standbys the
 * server streams to. `pg_stat_replication` lists every standby to any role;
 * only its other columns need pg_read_all_stats, and none is read here.
 */
const READ_REPLICATION = `SELECT current_setting('synchronous_commit') AS synchronous_commit,
  current_setting('synchronous_standby_names') AS synchronous_standby_names,
  pg_is_in_recovery() AS in_recovery,
  (SELECT count(*)::int FROM pg_stat_replication) AS standbys`;

interface ReplicationSettings {
  synchronous_commit: string;
  synchronous_standby_names: string;
  in_recovery: boolean;
  standbys: number;
}

/** Values of `synchronous_commit` with which a COMMIT returns before any standby has the transaction. */
const COMMIT_WAITS_FOR_NO_STANDBY = ['off', 'local'];

/**
 * At startup, reads the server settings under which a request the module
 * accepted can still fail or run twice, and warns once for each that is set
 * so: `idle_in_transaction_session_timeout` on the served connections, and
 * standbys a COMMIT does not wait for. Silent where it cannot tell (a query
 * it may not run): each is read on its own, and its faults are left to
 * IdempotencySchemaCheck, which retries.
 */
@Injectable()
export class ServerSettingsCheck implements OnModuleInit {
  private readonly logger = new Logger('Idempotency');

  constructor(
    private readonly served: IdempotencyDataSource,
    private readonly idle: IdleSessionTimeout,
  ) {}

  async onModuleInit(): Promise<void> {
    // IdempotencySchemaCheck says what to do about a DataSource that is not initialised.
    if (!this.served.dataSource.isInitialized) return;
    await Promise.all([this.checkIdleTimeout(), this.checkReplication()]);
  }

  /**
   * A request's transaction stays open for as long as its handler runs;
   * PostgreSQL ends the session of one whose handler waits longer than the
   * timeout between two statements (an external call), and that request
   * answers 503 on every retry. The value is kept for that 503's detail.
   */
  private async checkIdleTimeout(): Promise<void> {
    const [setting]: Array<{ shown: string; ms: number }> = await this.served.dataSource.query(READ_IDLE_TIMEOUT).catch(() => []);
    if (!setting || setting.ms <= 0) return;
    const { shown, ms } = setting;
    this.idle.shown = shown;
    this.idle.ms = ms;
    this.logger.warn(
      `idle_in_transaction_session_timeout is ${shown} on the served DataSource's connections: PostgreSQL ends the session of an @Idempotent() request ` +
        `whose handler spends longer than that between two statements (an external call), since the request's transaction stays open while it runs, ` +
        `and the request answers 503 on every retry. Raise or unset it for the app's role or database ` +
        `(ALTER ROLE … RESET idle_in_transaction_session_timeout), or move slow external calls into phased operations, @Idempotent({ phases: true }): see "External side effects" in the documentation (docs/side-effects.md).`,
    );
  }

  /**
   * An acknowledged transaction could be missing from a standby the server
   * fails over to: the idempotency record and the business writes alike, so
   * a retry of that key runs its handler again. Silent on a server with no
   * streaming standby (a single server, or a managed service that
   * replicates below PostgreSQL) and on a standby.
   */
  private async checkReplication(): Promise<void> {
    const [settings]: ReplicationSettings[] = await this.served.dataSource.query(READ_REPLICATION).catch(() => []);
    const risk = settings && failoverRisk(settings);
    if (risk) this.logger.warn(risk);
  }
}

/** What a failover could lose with these settings, with the settings that prevent it; undefined when nothing acknowledged is at risk or it cannot tell. */
function failoverRisk(settings: ReplicationSettings): string | undefined {
  if (settings.in_recovery || settings.standbys === 0) return undefined;
  const cause = COMMIT_WAITS_FOR_NO_STANDBY.includes(settings.synchronous_commit)
    ? `synchronous_commit is ${settings.synchronous_commit} on the served DataSource's connections, so a COMMIT returns before any standby has it`
    : settings.synchronous_standby_names.trim() === ''
      ? `synchronous_standby_names is empty, so the server streams to its ${settings.standbys === 1 ? 'standby' : `${settings.standbys} standbys`} asynchronously and a COMMIT returns before any has it`
      : undefined;
  if (!cause) return undefined;
  return (
    `${cause}. A failover to a standby can then lose the last acknowledged transactions: idempotency records and business writes alike, ` +
    `and a retry of such a key runs its handler again (an external effect it made happens twice). ` +
    `Name a synchronous standby (synchronous_standby_names = 'FIRST 1 (<standby application_name>)', or your HA tool's synchronous mode) ` +
    `with synchronous_commit = on or remote_apply: see "High availability" in the documentation (docs/scaling-out.md).`
  );
}
