import { Body, Controller, Injectable, Module, Post } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import request from 'supertest';
import {
  Idempotent,
  IdempotencyEvents,
  IdempotencyModule,
  IdempotencyReaper,
  IdempotencyRecord,
  idempotencyMigrations,
  InjectIdempotencyOptions,
  type ResolvedIdempotencyOptions,
  IdempotencyTransactionHost,
} from '../src/idempotency/index.js';
import { startApp, type RunningApp } from './support/http-app.js';
import { LEDGER_SCHEMA } from './support/ledger-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

/** A feature module's service: it injects everything the module offers apps, and writes through the transaction host. */
@Injectable()
class Notes {
  constructor(
    private readonly tx: IdempotencyTransactionHost,
    readonly events: IdempotencyEvents,
    readonly reaper: IdempotencyReaper,
    @InjectIdempotencyOptions() readonly options: ResolvedIdempotencyOptions,
  ) {}

  async write(label: string): Promise<{ entry: number }> {
    const [{ id }] = await this.tx.manager.query(`INSERT INTO ledger_entries (label) VALUES ($1) RETURNING id`, [label]);
    return { entry: Number(id) };
  }
}

@Idempotent()
@Controller('notes')
class NotesController {
  constructor(private readonly notes: Notes) {}

  @Post()
  create(@Body() body: { label: string }) {
    return this.notes.write(body.label);
  }
}

/** Imports nothing: IdempotencyModule is imported once, by the root module. */
@Module({ controllers: [NotesController], providers: [Notes] })
class NotesModule {}

describe('a controller in a feature module that imports nothing from the idempotency module', () => {
  let db: TestDatabase;
  let running: RunningApp;

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(LEDGER_SCHEMA);
    running = await startApp({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: db.url, entities: [IdempotencyRecord], migrations: idempotencyMigrations, migrationsRun: true }),
        IdempotencyModule.forRoot({ tenant: 'shared', reaper: false }),
        NotesModule,
      ],
    });
  });
  afterAll(async () => {
    await running?.close();
    await db?.drop();
  });

  it('gets @Idempotent() on its routes: a retry replays the first answer, and the handler ran once', async () => {
    const send = () => request(running.url).post('/notes').set('Idempotency-Key', 'feature-module-1').send({ label: 'feature' });
    const first = await send();
    const replay = await send();
    expect(first.status).toBe(201);
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(first.text);
    expect(await db.query(`SELECT label FROM ledger_entries`)).toEqual([{ label: 'feature' }]);
  });

  it('injects what the module offers apps: the transaction host, the events, the reaper and the options', () => {
    const notes = running.app.get(Notes);
    expect(notes.events).toBeInstanceOf(IdempotencyEvents);
    expect(notes.reaper).toBeInstanceOf(IdempotencyReaper);
    expect(notes.options.headerName).toBe('Idempotency-Key');
  });
});
