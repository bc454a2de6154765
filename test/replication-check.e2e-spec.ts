import type { LoggerService } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import pg from 'pg';
import { ReplicaPair, replicaPairBinaries, STANDBY_NAME } from '../harness/replica-pair.js';
import { freePort } from '../src/demo/database/embedded-postgres.js';
import { Ledger, ledgerAppModules, type LedgerDataSourceOptions } from './support/ledger-app.js';

const BINARIES = replicaPairBinaries();
if (!BINARIES) console.log('replication-check.e2e-spec: skipped, no PostgreSQL server binaries (apt-get install postgresql, or set POSTGRES_BIN_DIR)');

/** Keeps the Idempotency context's warnings. */
class WarningLog implements LoggerService {
  readonly warnings: string[] = [];
  log(): void {}
  error(): void {}
  warn(message: string, context: string): void {
    if (context === 'Idempotency') this.warnings.push(message);
  }
}

/**
 * A primary streaming to a standby of its own (harness/replica-pair.ts),
 * asynchronously at first: the app booted on it must say, once, that a
 * failover can lose acknowledged records, and name the settings that
 * prevent it; and say nothing once they are set, or where it cannot tell.
 */
describe.skipIf(!BINARIES)('the startup check of replication', () => {
  let pair: ReplicaPair;

  beforeAll(async () => {
    pair = await ReplicaPair.start({ primaryPort: await freePort(), standbyPort: await freePort(), replication: 'asynchronous', settings: { fsync: 'off' } });
  }, 120_000);
  afterAll(async () => {
    await pair?.stop();
  });

  async function bootWarnings(url: string, dataSource: LedgerDataSourceOptions = {}): Promise<string[]> {
    const logger = new WarningLog();
    const moduleRef = await Test.createTestingModule({ imports: ledgerAppModules(url, {}, dataSource), providers: [Ledger] }).compile();
    const app = moduleRef.createNestApplication({ logger });
    try {
      await app.init();
    } finally {
      await app.close();
    }
    return logger.warnings;
  }

  async function onPrimary(sql: string): Promise<void> {
    const client = new pg.Client({ connectionString: pair.primary.url() });
    await client.connect();
    await client.query(sql).finally(() => client.end());
  }

  it('warns once on a primary with an asynchronous standby, naming the cause and the settings that prevent the loss', async () => {
    expect(await pair.standbyState()).toEqual({ state: 'streaming', syncState: 'async' });
    const warnings = await bootWarnings(pair.primary.url());
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/^synchronous_standby_names is empty, so the server streams to its standby asynchronously/);
    expect(warnings[0]).toContain('can then lose the last acknowledged transactions');
    expect(warnings[0]).toContain("synchronous_standby_names = 'FIRST 1 (<standby application_name>)'");
    expect(warnings[0]).toContain('synchronous_commit = on or remote_apply');
  });

  it('says nothing on a standby, where it cannot tell what its primary does', async () => {
    expect(await bootWarnings(pair.standby.url(), { migrationsRun: false })).toEqual([]);
  });

  it('says nothing once the standby is synchronous, and warns again where the connections set synchronous_commit to local', async () => {
    await onPrimary(`ALTER SYSTEM SET synchronous_standby_names = '${STANDBY_NAME}'`);
    await onPrimary('SELECT pg_reload_conf()');
    await vi.waitFor(async () => expect((await pair.standbyState())?.syncState).toBe('sync'), { timeout: 10_000, interval: 100 });

    expect(await bootWarnings(pair.primary.url())).toEqual([]);

    const local = await bootWarnings(pair.primary.url(), { extra: { options: '-c synchronous_commit=local' } });
    expect(local).toHaveLength(1);
    expect(local[0]).toMatch(/^synchronous_commit is local on the served DataSource's connections, so a COMMIT returns before any standby has it/);
  });
});
