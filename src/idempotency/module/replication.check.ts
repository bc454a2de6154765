import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { IdempotencyDataSource } from '../transactions/idempotency-data-source.js';

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
 * At startup, reads how the served DataSource's server replicates, and warns
 * once when an acknowledged transaction could be missing from a standby it
 * fails over to: the idempotency record and the business writes alike, so a
 * retry of that key runs its handler again. Silent where it cannot tell: a
 * server with no streaming standby (a single server, or a managed service
 * that replicates below PostgreSQL), a standby, or a query it may not run.
 */
@Injectable()
export class ReplicationCheck implements OnModuleInit {
  constructor(private readonly served: IdempotencyDataSource) {}

  async onModuleInit(): Promise<void> {
    const dataSource = this.served.dataSource;
    // IdempotencySchemaCheck says what to do about a DataSource that is not initialised.
    if (!dataSource.isInitialized) return;
    const [settings]: ReplicationSettings[] = await dataSource.query(READ_REPLICATION).catch(() => []);
    const risk = settings && failoverRisk(settings);
    if (risk) new Logger('Idempotency').warn(risk);
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
