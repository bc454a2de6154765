import {
  BadGatewayException,
  Body,
  Controller,
  Get,
  HttpCode,
  HttpException,
  Injectable,
  Module,
  Param,
  Post,
  Res,
  StreamableFile,
} from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Readable } from 'node:stream';
import { Idempotent, IdempotencyModule, IdempotencyRecord, idempotencyMigrations, type IdempotencyModuleOptions, IdempotencyTransactionHost } from '../../src/idempotency/index.js';
import { IdempotencyPhasesModule, PhasedClaim, PhasedOperation, type Phases } from '../../src/idempotency/phases/index.js';

/**
 * A small app to drive the module through: every handler writes an entry
 * through IdempotencyTransactionHost, so a test can count how often it really ran.
 */
@Injectable()
export class Ledger {
  /**
   * Scripted behaviour of the next calls: a delay, a failure to throw after
   * writing, and a delay of the transaction's COMMIT (a deferred trigger
   * sleeps in it, with every row the transaction wrote still locked), which
   * may then fail.
   */
  readonly script: Array<{ delayMs?: number; fail?: HttpException | Error; commitDelayMs?: number; failAtCommit?: boolean }> = [];
  calls = 0;

  constructor(private readonly tx: IdempotencyTransactionHost) {}

  async write(label: string): Promise<{ entry: number; label: string }> {
    this.calls++;
    const step = this.script.shift() ?? {};
    const [{ id }] = await this.tx.manager.query(`INSERT INTO ledger_entries (label) VALUES ($1) RETURNING id`, [label]);
    if (step.commitDelayMs !== undefined || step.failAtCommit) {
      await this.tx.manager.query(`INSERT INTO ledger_slow_commits (ms, fail) VALUES ($1, $2)`, [step.commitDelayMs ?? 0, step.failAtCommit ?? false]);
    }
    if (step.delayMs) await new Promise((resolve) => setTimeout(resolve, step.delayMs));
    if (step.fail) throw step.fail;
    return { entry: Number(id), label };
  }

  /** Claims the label in `ledger_labels` (unique) first, then writes the entry. */
  async writeUnique(label: string): Promise<{ entry: number; label: string }> {
    await this.tx.manager.query(`INSERT INTO ledger_labels (label) VALUES ($1)`, [label]);
    return this.write(label);
  }

  /** The module's named prepared statements on the connection of the current transaction. */
  async preparedStatements(): Promise<string[]> {
    const rows: Array<{ name: string }> = await this.tx.manager.query(`SELECT name FROM pg_prepared_statements WHERE name LIKE 'idempotency.%' ORDER BY name`);
    return rows.map((row) => row.name);
  }
}

interface EntryBody {
  label: string;
}

/** An external peer the test steers: it passes, fails, or holds each call until released. */
@Injectable()
export class NotifyGate {
  mode: 'pass' | 'fail' | 'hold' = 'pass';
  /** Downstream keys of the calls that went through. */
  readonly delivered: string[] = [];
  private readonly held: Array<() => void> = [];

  async notify(downstreamKey: string): Promise<{ receipt: string }> {
    if (this.mode === 'fail') throw new BadGatewayException('peer unavailable');
    if (this.mode === 'hold') await new Promise<void>((resolve) => this.held.push(resolve));
    this.delivered.push(downstreamKey);
    return { receipt: `receipt-${downstreamKey.slice(0, 8)}` };
  }

  /** Lets held calls go through. */
  release(): void {
    for (const resume of this.held.splice(0)) resume();
  }

  get heldCount(): number {
    return this.held.length;
  }
}

interface Transfer {
  debit: number;
  receipt: string;
  credit: number;
}

/** Debit (local), notify (external), credit (local): counts how often each phase really ran. */
@PhasedOperation('ledger-transfer')
export class LedgerTransfer implements PhasedOperation<EntryBody, Transfer> {
  readonly runs = { debit: 0, notify: 0, credit: 0 };

  constructor(
    private readonly ledger: Ledger,
    private readonly gate: NotifyGate,
  ) {}

  async run(input: EntryBody, phases: Phases): Promise<Transfer> {
    const debit = await phases.local('debit', () => (this.runs.debit++, this.ledger.write(`debit:${input.label}`)));
    const { receipt } = await phases.external('notify', (key) => (this.runs.notify++, this.gate.notify(key)));
    const credit = await phases.local('credit', () => (this.runs.credit++, this.ledger.write(`credit:${input.label}`)));
    return { debit: debit.entry, receipt, credit: credit.entry };
  }
}

/** The ledger transfer, answered in a shape of its own with a `Location`: whoever finishes it answers the same. */
@PhasedOperation('shaped-transfer')
export class ShapedTransfer implements PhasedOperation<EntryBody, Transfer> {
  constructor(private readonly transfer: LedgerTransfer) {}

  run(input: EntryBody, phases: Phases) {
    return this.transfer.run(input, phases);
  }

  respond(transfer: Transfer) {
    return { body: { transfer }, headers: { Location: `/entries/${transfer.credit}` } };
  }
}

/** One local phase that locks a row of `ledger_locks` first: a test holding that row stalls the phase, the record locked. */
@PhasedOperation('locked-transfer')
export class LockedTransfer implements PhasedOperation<EntryBody, { label: string }> {
  constructor(private readonly tx: IdempotencyTransactionHost) {}

  async run(input: EntryBody, phases: Phases) {
    return phases.local('locked', async () => {
      await this.tx.manager.query(`SELECT id FROM ledger_locks WHERE id = 1 FOR UPDATE`);
      return { label: input.label };
    });
  }
}

@Controller('entries')
export class EntriesController {
  constructor(private readonly ledger: Ledger) {}

  @Post()
  @Idempotent({ storeErrors: [402] })
  create(@Body() body: EntryBody) {
    return this.ledger.write(body.label);
  }

  @Post(':account/transfers')
  @HttpCode(200)
  @Idempotent({ wait: 200 })
  transfer(@Param('account') account: string, @Body() body: EntryBody) {
    return this.ledger.write(`${account}:${body.label}`);
  }

  @Post('optional')
  @Idempotent({ required: false })
  optional(@Body() body: EntryBody) {
    return this.ledger.write(body.label);
  }

  @Post('labelled')
  @Idempotent({ fingerprint: ['body.label'] })
  labelled(@Body() body: EntryBody) {
    return this.ledger.write(body.label);
  }

  @Post('v1')
  @Idempotent({ operation: 'create-entry', version: '1' })
  createV1(@Body() body: EntryBody) {
    return this.ledger.write(body.label);
  }

  @Post('v2')
  @Idempotent({ operation: 'create-entry', version: '2' })
  createV2(@Body() body: EntryBody) {
    return this.ledger.write(body.label);
  }

  /** Sets a replayed header (Location) and one that is not (X-Entry) on the live response. */
  @Post('located')
  @Idempotent()
  async located(@Body() body: EntryBody, @Res({ passthrough: true }) response: { header(name: string, value: string): unknown }) {
    const written = await this.ledger.write(body.label);
    response.header('Location', `/entries/${written.entry}`);
    response.header('X-Entry', String(written.entry));
    return written;
  }

  @Post('unique')
  @Idempotent()
  unique(@Body() body: EntryBody) {
    return this.ledger.writeUnique(body.label);
  }

  @Post('prepared')
  @Idempotent()
  async prepared(@Body() body: EntryBody) {
    const { entry } = await this.ledger.write(body.label);
    return { entry, prepared: await this.ledger.preparedStatements() };
  }

  @Post('text')
  @Idempotent()
  async text(@Body() body: EntryBody) {
    const { entry } = await this.ledger.write(body.label);
    return `entry ${entry}`;
  }

  /** Echoes the request's `note` as text: with a NUL character in it, a body PostgreSQL's text cannot hold. */
  @Post('echo')
  @Idempotent()
  async echo(@Body() body: EntryBody & { note: string }) {
    const { entry } = await this.ledger.write(body.label);
    return `entry ${entry}: ${body.note}`;
  }

  @Post('empty')
  @HttpCode(204)
  @Idempotent()
  async empty(@Body() body: EntryBody) {
    await this.ledger.write(body.label);
  }

  @Post('file')
  @Idempotent()
  async file(@Body() body: EntryBody) {
    await this.ledger.write(body.label);
    return new StreamableFile(Readable.from(['not', 'recordable']));
  }

  @Post('transfers')
  @Idempotent({ phases: true, wait: 300 })
  phasedTransfer(@Body() body: EntryBody, @PhasedClaim() claim: PhasedClaim) {
    return claim.run(LedgerTransfer, { label: body.label });
  }

  /** Reshapes what run() settled with: ignored, since the completer could not reshape it. */
  @Post('wrapped-transfers')
  @Idempotent({ phases: true })
  async wrappedTransfer(@Body() body: EntryBody, @PhasedClaim() claim: PhasedClaim) {
    return { wrapped: await claim.run(LedgerTransfer, { label: body.label }) };
  }

  @Post('locked-transfers')
  @Idempotent({ phases: true, wait: 1000 })
  lockedTransfer(@Body() body: EntryBody, @PhasedClaim() claim: PhasedClaim) {
    return claim.run(LockedTransfer, { label: body.label });
  }

  @Post('shaped-transfers')
  @Idempotent({ phases: true })
  shapedTransfer(@Body() body: EntryBody, @PhasedClaim() claim: PhasedClaim) {
    return claim.run(ShapedTransfer, { label: body.label });
  }

  @Post('transfers/unstarted')
  @Idempotent({ phases: true })
  unstarted() {
    throw new Error('failed before the operation started');
  }

  @Get()
  async count() {
    return { calls: this.ledger.calls };
  }
}

@Module({ imports: [IdempotencyPhasesModule], controllers: [EntriesController], providers: [Ledger, NotifyGate, LedgerTransfer, ShapedTransfer, LockedTransfer] })
export class EntriesModule {}

/** Tenant from `X-Tenant`, so tests can act for several tenants or none. */
export const tenantFromHeader = (request: { headers: Record<string, string | undefined> }) => request.headers['x-tenant'];

/** What a suite may change in the DataSource's options: by default the migrations run and nothing synchronizes. */
export interface LedgerDataSourceOptions {
  migrationsRun?: boolean;
  synchronize?: boolean;
  manualInitialization?: boolean;
  /** Passed to the pg pool, e.g. `{ options: '-c search_path=other' }`. */
  extra?: Record<string, unknown>;
}

/** The ledger app's modules; `tenant` defaults to `X-Tenant`'s value. */
export function ledgerAppModules(databaseUrl: string, options: Partial<IdempotencyModuleOptions> = {}, dataSource: LedgerDataSourceOptions = {}) {
  return [
    TypeOrmModule.forRoot({
      type: 'postgres',
      url: databaseUrl,
      entities: [IdempotencyRecord],
      migrations: idempotencyMigrations,
      migrationsRun: true,
      ...dataSource,
    }),
    IdempotencyModule.forRoot({ tenant: tenantFromHeader, ...options }),
    EntriesModule,
  ];
}

export const LEDGER_SCHEMA = `
  CREATE TABLE IF NOT EXISTS ledger_entries (id bigserial PRIMARY KEY, label text NOT NULL);
  CREATE TABLE IF NOT EXISTS ledger_locks (id int PRIMARY KEY);
  INSERT INTO ledger_locks VALUES (1) ON CONFLICT DO NOTHING;
  CREATE TABLE IF NOT EXISTS ledger_labels (label text PRIMARY KEY);
  CREATE TABLE IF NOT EXISTS ledger_slow_commits (ms int NOT NULL, fail boolean NOT NULL, tx bigint NOT NULL DEFAULT txid_current());`;

/**
 * What makes a scripted COMMIT slow, or fail (`commitDelayMs`,
 * `failAtCommit`): a deferred trigger on the module's records, which a
 * request's transaction writes with its COMMIT, sleeps for (and may fail on)
 * the rows that transaction put in `ledger_slow_commits`. A deferred trigger
 * on a table of the ledger's would fire at the end of the write that fills
 * it, as that write's own COMMIT would. Installed once the app's migrations
 * created the records table.
 */
export const COMMIT_FAULTS = `
  CREATE OR REPLACE FUNCTION ledger_sleep_at_commit() RETURNS trigger LANGUAGE plpgsql AS
    'DECLARE fault record;
     BEGIN
       FOR fault IN SELECT ms, fail FROM ledger_slow_commits WHERE tx = txid_current() LOOP
         PERFORM pg_sleep(fault.ms / 1000.0);
         IF fault.fail THEN RAISE EXCEPTION ''scripted failure at commit''; END IF;
       END LOOP;
       RETURN NULL;
     END';
  DROP TRIGGER IF EXISTS ledger_slow_commit ON idempotency_records;
  CREATE CONSTRAINT TRIGGER ledger_slow_commit AFTER INSERT OR UPDATE ON idempotency_records
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ledger_sleep_at_commit();`;
