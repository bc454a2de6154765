import { Body, Controller, type DynamicModule, Logger, Post } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import request from 'supertest';
import { Idempotent, IdempotencyConfigurationError, IdempotencyModule, type IdempotencyModuleOptions, IdempotencyRecord, idempotencyMigrations, InjectIdempotencyOptions, type ResolvedIdempotencyOptions, IdempotencyTransactionHost } from '../src/idempotency/index.js';
import { IdempotencyOutboxModule, Outbox } from '../src/idempotency/outbox/index.js';
import { startApp, type RunningApp } from './support/http-app.js';
import { LEDGER_SCHEMA } from './support/ledger-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

@Controller('notes')
class NotesController {
  constructor(
    private readonly tx: IdempotencyTransactionHost,
    private readonly outbox: Outbox,
    @InjectIdempotencyOptions() readonly options: ResolvedIdempotencyOptions,
  ) {}

  @Post()
  @Idempotent()
  async create(@Body() body: { label: string }) {
    const [{ id }] = await this.tx.manager.query(`INSERT INTO ledger_entries (label) VALUES ($1) RETURNING id`, [body.label]);
    await this.outbox.add({ type: 'note.created', payload: { id } });
    return { entry: Number(id) };
  }
}

describe('IdempotencyModule.forRoot() with tenant alone and IdempotencyOutboxModule.forRoot() without options', () => {
  let db: TestDatabase;
  let running: RunningApp;

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(LEDGER_SCHEMA);
    running = await startApp({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: db.url, entities: [IdempotencyRecord], migrations: idempotencyMigrations, migrationsRun: true }),
        // Every option but tenant has a default.
        IdempotencyModule.forRoot({ tenant: 'shared' }),
        IdempotencyOutboxModule.forRoot(),
      ],
      controllers: [NotesController],
    });
  });
  afterAll(async () => {
    await running?.close();
    await db?.drop();
  });

  it('run with the defaults: the Idempotency-Key header, a day of retention, the reaper on', () => {
    const { options } = running.app.get(NotesController);
    expect(options).toMatchObject({ headerName: 'Idempotency-Key', retention: 24 * 60 * 60 * 1000, dataSource: 'default', reaper: { enabled: true } });
  });

  it('replay a retry, and write the outbox event once, in the request’s transaction', async () => {
    const send = () => request(running.url).post('/notes').set('Idempotency-Key', 'defaults-1').send({ label: 'defaults' });
    const first = await send();
    const replay = await send();
    expect(first.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(first.text);
    expect(await db.query(`SELECT label FROM ledger_entries`)).toEqual([{ label: 'defaults' }]);
    expect(await db.query(`SELECT type FROM idempotency_outbox`)).toEqual([{ type: 'note.created' }]);
  });

  it("keep every caller's keys in the one scope they had before tenant was required, anonymous, with tenant: 'shared'", async () => {
    const send = (tenant: string) => request(running.url).post('/notes').set('Idempotency-Key', 'shared-1').set('X-Tenant', tenant).send({ label: 'shared' });
    const first = await send('acme');
    const other = await send('globex');
    expect(first.status).toBe(201);
    expect([other.headers['idempotent-replayed'], other.text]).toEqual(['true', first.text]);
    expect(await db.query(`SELECT scope FROM idempotency_records WHERE key = 'shared-1'`)).toEqual([{ scope: 'anonymous' }]);
  });
});

describe('IdempotencyModule without tenant', () => {
  // No connection: the boot fails before any is needed.
  const boot = (idempotency: DynamicModule) =>
    Test.createTestingModule({
      imports: [TypeOrmModule.forRoot({ type: 'postgres', url: 'postgres://127.0.0.1:1/none', entities: [IdempotencyRecord], manualInitialization: true }), idempotency],
    }).compile();

  afterEach(() => {
    Logger.overrideLogger(false); // a failed compile leaves the testing module's logger in place
  });

  it.each([
    ['forRoot()', () => IdempotencyModule.forRoot({} as IdempotencyModuleOptions)],
    ['forRootAsync()', () => IdempotencyModule.forRootAsync({ useFactory: () => ({}) as IdempotencyModuleOptions })],
    ['forRoot() with no argument (JavaScript)', () => (IdempotencyModule.forRoot as () => DynamicModule)()],
  ])('refuses to start with %s, naming the option and both ways to state it', async (_how, define) => {
    const error = await boot(define()).catch((failure: unknown) => failure);
    expect(error).toBeInstanceOf(IdempotencyConfigurationError);
    expect((error as Error).message).toMatch(/^IdempotencyModule: `tenant` is required\. /);
    expect((error as Error).message).toContain('`tenant: (request) => request.user?.tenantId`');
    expect((error as Error).message).toContain("`tenant: 'shared'`");
  });

  it('refuses a tenant that is neither a resolver nor shared, naming what it got', async () => {
    const error = await boot(IdempotencyModule.forRoot({ tenant: 'acme' } as unknown as IdempotencyModuleOptions)).catch((failure: unknown) => failure);
    expect(error).toBeInstanceOf(IdempotencyConfigurationError);
    expect((error as Error).message).toContain('`tenant` is required (got "acme")');
  });
});
