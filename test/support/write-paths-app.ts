import { Body, Controller, Inject, Injectable, Module, Param, Post, type Type } from '@nestjs/common';
import { getDataSourceToken, getEntityManagerToken, getRepositoryToken, TypeOrmModule } from '@nestjs/typeorm';
import { setTimeout as sleep } from 'node:timers/promises';
import { Column, DataSource, EntityManager, Entity, PrimaryGeneratedColumn, Repository } from 'typeorm';
import { Idempotent, IdempotencyReaper, IdempotencyRecord, idempotencyMigrations, IdempotencyTransactionHost } from '../../src/idempotency/index.js';
import { IdempotencyPhasesModule, PhasedClaim, PhasedOperation, type Phases } from '../../src/idempotency/phases/index.js';

/** A row written by one of the ways Nest code writes through TypeORM. */
@Entity({ name: 'written_notes' })
export class WrittenNote {
  @PrimaryGeneratedColumn()
  id: number;

  @Column('text')
  path: string;

  @Column('text')
  label: string;
}

export const WRITTEN_NOTES_SCHEMA = `CREATE TABLE IF NOT EXISTS written_notes (id serial PRIMARY KEY, path text NOT NULL, label text NOT NULL)`;

/** Every way the test app writes a row, by the name a route takes. */
export const WRITE_PATHS = [
  'transaction-host',
  'injected-repository',
  'injected-repository-query-builder',
  'injected-repository-query',
  'injected-entity-manager',
  'data-source-manager',
  'data-source-get-repository',
  'data-source-query',
  'data-source-query-builder',
  'data-source-transaction',
] as const;
export type WritePath = (typeof WRITE_PATHS)[number];

export interface NoteBody {
  label: string;
  /** Throw after writing. */
  fail?: boolean;
  /** Throw after writing in the first this many executions for the label, then succeed. */
  failFirst?: number;
  /** Before writing, have the server end the transaction's connection while the handler waits on other work. */
  loseConnection?: boolean;
}

/** The test app's routes and services, on the DataSource named `connection` (default: the default one). */
export interface WritePathsApp {
  module: Type<unknown>;
  writer: Type<NoteWriterApi>;
}

export interface NoteWriterApi {
  write(path: WritePath, label: string): Promise<void>;
  /** Executions so far, by label. */
  readonly executions: Map<string, number>;
  readonly lateFailures: unknown[];
}

/**
 * Builds the test app's module for one connection: a writer with each write
 * path (an injected repository, the injected EntityManager, the DataSource's
 * manager, repositories and raw queries, IdempotencyTransactionHost), idempotent routes
 * that write through a chosen path and then fail or succeed, and unprotected
 * ones to show that nothing changes outside an idempotent request.
 */
export function writePathsApp(connection?: string): WritePathsApp {
  @Injectable()
  class NoteWriter implements NoteWriterApi {
    readonly executions = new Map<string, number>();
    /** Errors of writes a handler started without awaiting them. */
    readonly lateFailures: unknown[] = [];

    constructor(
      @Inject(getRepositoryToken(WrittenNote, connection)) private readonly notes: Repository<WrittenNote>,
      @Inject(getEntityManagerToken(connection)) private readonly manager: EntityManager,
      @Inject(getDataSourceToken(connection)) readonly dataSource: DataSource,
      readonly tx: IdempotencyTransactionHost,
    ) {}

    async write(path: WritePath, label: string): Promise<void> {
      const note = { path, label };
      switch (path) {
        case 'transaction-host':
          return void (await this.tx.manager.insert(WrittenNote, note));
        case 'injected-repository':
          return void (await this.notes.save(this.notes.create(note)));
        case 'injected-repository-query-builder':
          return void (await this.notes.createQueryBuilder().insert().values(note).execute());
        case 'injected-repository-query':
          return void (await this.notes.query(`INSERT INTO written_notes (path, label) VALUES ($1, $2)`, [path, label]));
        case 'injected-entity-manager':
          return void (await this.manager.save(WrittenNote, note));
        case 'data-source-manager':
          return void (await this.dataSource.manager.insert(WrittenNote, note));
        case 'data-source-get-repository':
          return void (await this.dataSource.getRepository(WrittenNote).save(note));
        case 'data-source-query':
          return void (await this.dataSource.query(`INSERT INTO written_notes (path, label) VALUES ($1, $2)`, [path, label]));
        case 'data-source-query-builder':
          return void (await this.dataSource.createQueryBuilder().insert().into(WrittenNote).values(note).execute());
        case 'data-source-transaction':
          return void (await this.dataSource.transaction((manager) => manager.insert(WrittenNote, note)));
      }
    }

    /** Terminates the backend of the caller's transaction from another connection, and waits until TypeORM has let its runner go. */
    async loseConnection(): Promise<void> {
      const runner = this.tx.manager.queryRunner!;
      const [{ pid }] = await this.tx.manager.query(`SELECT pg_backend_pid() AS pid`);
      await this.tx.outside(() => this.dataSource.query(`SELECT pg_terminate_backend($1)`, [pid]));
      while (!runner.isReleased) await sleep(10);
    }

    /** Writes, then fails or succeeds as the body asks; a short pause lets duplicates pile up. */
    async execute(path: WritePath, body: NoteBody): Promise<{ label: string; execution: number }> {
      const execution = (this.executions.get(body.label) ?? 0) + 1;
      this.executions.set(body.label, execution);
      if (body.loseConnection) await this.loseConnection();
      await this.write(path, body.label);
      await sleep(20);
      if (body.fail || execution <= (body.failFirst ?? 0)) throw new Error(`failed after writing (${path})`);
      return { label: body.label, execution };
    }
  }

  /** A phased operation whose local phase writes through the injected repository. */
  @PhasedOperation(`note-phases${connection ? `:${connection}` : ''}`)
  class NotePhases implements PhasedOperation<NoteBody, { phase: string }> {
    constructor(private readonly writer: NoteWriter) {}

    async run(input: NoteBody, phases: Phases) {
      await phases.local('note', async () => {
        if (input.loseConnection) await this.writer.loseConnection();
        await this.writer.write('injected-repository', `phase:${input.label}`);
        if (input.fail) throw new Error('the local phase failed after writing');
      });
      await phases.external('peer', async () => this.writer.write('injected-repository', `external:${input.label}`));
      return { phase: 'done' };
    }
  }

  @Controller('writes')
  class WritesController {
    constructor(
      private readonly writer: NoteWriter,
      private readonly reaper: IdempotencyReaper,
    ) {}

    /** Writes outside the request's transaction on purpose, then fails. */
    @Post('outside')
    @Idempotent()
    async outside(@Body() body: NoteBody) {
      await this.writer.tx.outside(() => this.writer.write('injected-repository', body.label));
      throw new Error('failed after writing outside the transaction');
    }

    /** Starts a write through a repository it does not await: it runs once the transaction has ended. */
    @Post('late')
    @Idempotent()
    late(@Body() body: NoteBody) {
      void sleep(50)
        .then(() => this.writer.write('injected-repository', body.label))
        .catch((error: unknown) => this.writer.lateFailures.push(error));
      return { label: body.label };
    }

    /** Starts a write it does not await, then fails: the request's transaction has rolled back by the time the write comes. */
    @Post('late-failed')
    @Idempotent()
    lateFailed(@Body() body: NoteBody) {
      void sleep(50)
        .then(() => this.writer.write('injected-repository', body.label))
        .catch((error: unknown) => this.writer.lateFailures.push(error));
      throw new Error('failed, leaving a write behind');
    }

    /** Starts a write through IdempotencyTransactionHost.manager it does not await: the request's transaction has ended by then. */
    @Post('late-host')
    @Idempotent()
    lateHost(@Body() body: NoteBody) {
      void sleep(50)
        .then(() => this.writer.write('transaction-host', body.label))
        .catch((error: unknown) => this.writer.lateFailures.push(error));
      return { label: body.label };
    }

    /** The reaper, run by hand inside a request that then fails, still deletes: it never joins the request. */
    @Post('reap')
    @Idempotent()
    async reap() {
      await this.reaper.reap();
      throw new Error('failed after reaping');
    }

    @Post('phased')
    @Idempotent({ phases: true })
    async phased(@Body() body: NoteBody, @PhasedClaim() claim: PhasedClaim) {
      // Before run(): a phased route has no transaction open here (see docs/business-code.md).
      await this.writer.write('injected-repository', `before-run:${body.label}`);
      return claim.run(NotePhases, body);
    }

    /** Commits through a QueryRunner of the handler's own, then fails: that transaction is the handler's. */
    @Post('own-runner')
    @Idempotent()
    async ownRunner(@Body() body: NoteBody) {
      const runner = this.writer.dataSource.createQueryRunner();
      try {
        await runner.connect();
        await runner.startTransaction();
        await runner.manager.getRepository(WrittenNote).insert({ path: 'own-runner', label: body.label });
        await runner.commitTransaction();
      } finally {
        await runner.release();
      }
      throw new Error('failed after its own transaction committed');
    }

    /** A nested dataSource.transaction() is a savepoint: its failure undoes its own writes only. */
    @Post('savepoint')
    @Idempotent()
    async savepoint(@Body() body: NoteBody) {
      const transactionId = async (manager: EntityManager) => (await manager.query(`SELECT txid_current() AS id`))[0].id as string;
      await this.writer.write('injected-repository', `outer:${body.label}`);
      const claimTransaction = await transactionId(this.writer.tx.manager);
      let nestedTransaction: string | undefined;
      await this.writer.dataSource
        .transaction(async (manager) => {
          nestedTransaction = await transactionId(manager);
          await manager.insert(WrittenNote, { path: 'savepoint', label: `inner:${body.label}` });
          throw new Error('inner failure');
        })
        .catch(() => undefined);
      await this.writer.write('data-source-get-repository', `after:${body.label}`);
      if (body.fail) throw new Error('failed after the nested transaction');
      return { sameTransaction: nestedTransaction === claimTransaction };
    }

    @Post(':path')
    @Idempotent({ wait: 10_000 })
    write(@Param('path') path: WritePath, @Body() body: NoteBody) {
      return this.writer.execute(path, body);
    }

    @Post(':path/unprotected')
    unprotected(@Param('path') path: WritePath, @Body() body: NoteBody) {
      return this.writer.execute(path, body);
    }
  }

  @Module({
    imports: [TypeOrmModule.forFeature([WrittenNote], connection), IdempotencyPhasesModule],
    controllers: [WritesController],
    providers: [NoteWriter, NotePhases],
  })
  class WritePathsModule {}

  return { module: WritePathsModule, writer: NoteWriter };
}

/**
 * TypeORM options of the test app: enough pool connections that 20 duplicates
 * never starve the owner; `pipeline` turns on node-postgres pipelining, so
 * joined writes are tested on both kinds of connection.
 */
export function writePathsTypeOrm(url: string, options: { name?: string; pipeline?: boolean } = {}) {
  return TypeOrmModule.forRoot({
    name: options.name,
    type: 'postgres',
    url,
    entities: [IdempotencyRecord, WrittenNote],
    migrations: idempotencyMigrations,
    migrationsRun: true,
    extra: { max: 24, pipeline: options.pipeline ?? false },
  });
}
