import { Body, Controller, Post } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import request from 'supertest';
import {
  Idempotent,
  IdempotencyModule,
  IdempotencyOutboxModule,
  IdempotencyRecord,
  idempotencyMigrations,
  InjectIdempotencyOptions,
  Outbox,
  type ResolvedIdempotencyOptions,
  TransactionHost,
} from '../src/idempotency/index.js';
import { startApp, type RunningApp } from './support/http-app.js';
import { LEDGER_SCHEMA } from './support/ledger-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

@Controller('notes')
class NotesController {
  constructor(
    private readonly tx: TransactionHost,
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

describe('IdempotencyModule.forRoot() and IdempotencyOutboxModule.forRoot() without options', () => {
  let db: TestDatabase;
  let running: RunningApp;

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(LEDGER_SCHEMA);
    running = await startApp({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: db.url, entities: [IdempotencyRecord], migrations: idempotencyMigrations, migrationsRun: true }),
        // No argument: every option has a default.
        IdempotencyModule.forRoot(),
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
    expect(options).toMatchObject({ headerName: 'Idempotency-Key', retention: 24 * 60 * 60 * 1000, claim: 'first', dataSource: 'default', reaper: { enabled: true } });
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
});
