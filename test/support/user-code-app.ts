import { Body, Controller, HttpCode, Injectable, Module, type ModuleMetadata, type OnModuleDestroy, Post, Req, Res, UploadedFile, UseInterceptors } from '@nestjs/common';
import { FileInterceptor } from '@nestjs/platform-express';
import { InjectDataSource, InjectRepository, TypeOrmModule } from '@nestjs/typeorm';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { Column, DataSource, Entity, PrimaryGeneratedColumn, QueryFailedError, Repository } from 'typeorm';
import { Idempotent, IdempotencyRecord, idempotencyMigrations, IdempotencyTransactionHost } from '../../src/idempotency/index.js';
import { Outbox } from '../../src/idempotency/outbox/index.js';
import type { HttpAdapterName } from '../../src/demo/http/http-setup.js';

/** A row the handlers write, one per label. */
@Entity({ name: 'user_rows' })
export class UserRow {
  @PrimaryGeneratedColumn()
  id: number;

  @Column('text', { unique: true })
  label: string;
}

/** A tenant's schema, as an app with a schema per tenant has one: its own `user_rows`. */
export const TENANT_SCHEMA = 'user_code_tenant';

/**
 * The table, the tenant's copy of it, and a deferred constraint trigger that
 * fails with SQLSTATE 22012 (division by zero) at COMMIT for a row labelled
 * `divide…`: a failure of the handler's own that surfaces only when the
 * transaction commits.
 */
export const USER_ROWS_SCHEMA = `
  CREATE TABLE IF NOT EXISTS user_rows (id serial PRIMARY KEY, label text NOT NULL UNIQUE);
  CREATE SCHEMA IF NOT EXISTS ${TENANT_SCHEMA};
  CREATE TABLE IF NOT EXISTS ${TENANT_SCHEMA}.user_rows (id serial PRIMARY KEY, label text NOT NULL UNIQUE);
  CREATE OR REPLACE FUNCTION user_rows_divide() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM 1 / 0; RETURN NULL; END $$;
  DROP TRIGGER IF EXISTS user_rows_divide ON user_rows;
  CREATE CONSTRAINT TRIGGER user_rows_divide AFTER INSERT ON user_rows DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.label LIKE 'divide%') EXECUTE FUNCTION user_rows_divide();`;

/** Calls to the outside world, by label: shared by every app of a test, as a provider's ledger would be. */
export const providerCalls = new Map<string, number>();
/** Runs of the any-json handler, in this process. */
let anyJsonRuns = 0;
/** Errors of work the handlers did not await. */
export const lateErrors: unknown[] = [];

interface Labelled {
  label: string;
  fail?: boolean;
  holdMs?: number;
}

/**
 * A buffered audit writer as apps write them: rows are kept in memory and a
 * timer flushes them, started by the first row. Its timer may start inside
 * an idempotent request, and then inherits that request's context; `outside`
 * is the documented way to start it outside the request's transaction.
 */
abstract class AuditWriter implements OnModuleDestroy {
  private readonly buffer: string[] = [];
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly rows: Repository<UserRow>,
    protected readonly tx: IdempotencyTransactionHost,
  ) {}

  protected abstract startTimer(flush: () => void): NodeJS.Timeout;

  add(label: string): void {
    this.buffer.push(label);
    this.timer ??= this.startTimer(() => void this.flush());
  }

  private async flush(): Promise<void> {
    const labels = this.buffer.splice(0);
    if (labels.length === 0) return;
    try {
      await this.rows.insert(labels.map((label) => ({ label })));
    } catch (error) {
      lateErrors.push(error);
    }
  }

  onModuleDestroy(): void {
    clearInterval(this.timer);
  }
}

/** Starts its timer wherever the first row is added: inside a request, it inherits the request's context. */
@Injectable()
export class InheritingAuditWriter extends AuditWriter {
  constructor(@InjectRepository(UserRow) rows: Repository<UserRow>, tx: IdempotencyTransactionHost) {
    super(rows, tx);
  }

  protected startTimer(flush: () => void): NodeJS.Timeout {
    return setInterval(flush, 20);
  }
}

/** Starts its timer with `IdempotencyTransactionHost.outside()`: its flushes never join a request's transaction. */
@Injectable()
export class DetachedAuditWriter extends AuditWriter {
  constructor(@InjectRepository(UserRow) rows: Repository<UserRow>, tx: IdempotencyTransactionHost) {
    super(rows, tx);
  }

  protected startTimer(flush: () => void): NodeJS.Timeout {
    return this.tx.outside(() => setInterval(flush, 20));
  }
}

/** An Express response or a Fastify reply, as handlers that take `@Res({ passthrough: true })` use them. */
type AnyResponse = { status(code: number): unknown; send(body: unknown): unknown; write?(chunk: string): unknown; end?(): unknown; raw?: NodeJS.WritableStream & { write(chunk: string): unknown; end(): unknown } };

/** Ordinary user code, each route the way some app writes it, all with the module's default options. */
@Controller('user-code')
class UserCodeController {
  constructor(
    @InjectRepository(UserRow) private readonly rows: Repository<UserRow>,
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly outbox: Outbox,
    private readonly inheriting: InheritingAuditWriter,
    private readonly detached: DetachedAuditWriter,
  ) {}

  /** Calls a provider, then saves its row: the call must happen once per key. */
  @Post('charge')
  @Idempotent({ wait: 10_000 })
  async charge(@Body() body: Labelled) {
    providerCalls.set(body.label, (providerCalls.get(body.label) ?? 0) + 1);
    await sleep(50);
    await this.rows.insert({ label: body.label });
    return { label: body.label, charged: true };
  }

  /** Answers 202 through the response it takes, as without the module. */
  @Post('accepted')
  @Idempotent()
  accepted(@Body() body: Labelled, @Res({ passthrough: true }) res: AnyResponse) {
    res.status(202);
    return { label: body.label, queued: true };
  }

  /** Writes a row, then writes the answer itself: the row must roll back and no 2xx leave. */
  @Post('raw/:how')
  @Idempotent()
  writesItself(@Body() body: Labelled & { how: string }, @Res({ passthrough: true }) res: AnyResponse) {
    return this.writeRaw(body, res);
  }

  private async writeRaw(body: Labelled & { how: string }, res: AnyResponse): Promise<void> {
    await this.rows.insert({ label: body.label });
    const raw = res.raw ?? (res as unknown as NodeJS.WritableStream & { write(chunk: string): unknown; end(): unknown });
    if (body.how === 'send') res.send('written by the handler');
    else if (body.how === 'write') {
      raw.write('written ');
      raw.end();
    } else Readable.from(['streamed ', 'by the handler']).pipe(raw);
  }

  /** Any JSON, unvalidated: only the module's fingerprint tells one body from another. */
  @Post('any-json')
  @Idempotent()
  anyJson() {
    return { run: ++anyJsonRuns };
  }

  /** A text body, read as the handler would without the module: parsed (Fastify), or from the stream (Express, no text parser). */
  @Post('text')
  @Idempotent()
  async text(@Req() req: { body?: unknown } & AsyncIterable<Buffer>) {
    if (typeof req.body === 'string') return { text: req.body };
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk);
    return { text: Buffer.concat(chunks).toString('utf8') };
  }

  /** Starts a write it does not await, then answers (or fails) at once: the write is part of the request, and never fails on its own. */
  @Post('unawaited')
  @Idempotent()
  unawaited(@Body() body: Labelled) {
    void this.rows.insert({ label: body.label });
    if (body.fail) throw new Error('failed after starting a write');
    return { label: body.label };
  }

  /** Starts an outbox write it does not await, then fails: the event must never commit. */
  @Post('late-event')
  @Idempotent()
  lateEvent(@Body() body: Labelled) {
    setTimeout(() => this.outbox.add({ type: 'late', payload: body }).catch((error: unknown) => lateErrors.push(error)), 30);
    throw new Error('failed after starting a late outbox write');
  }

  /** Adds an event and holds its transaction open a while. */
  @Post('slow-event')
  @Idempotent()
  async slowEvent(@Body() body: Labelled) {
    await this.outbox.add({ type: 'slow', payload: body });
    await sleep(body.holdMs ?? 200);
    return { label: body.label };
  }

  /** Two units at once, one of which fails: the other's row stays, as with two connections. */
  @Post('units/all-settled')
  @Idempotent()
  async allSettled(@Body() body: Labelled) {
    const results = await Promise.allSettled([
      this.dataSource.transaction((manager) => manager.insert(UserRow, { label: `${body.label}:kept` })),
      this.dataSource.transaction(async (manager) => {
        await manager.insert(UserRow, { label: `${body.label}:undone` });
        throw new Error('this unit fails');
      }),
    ]);
    return results.map((result) => result.status);
  }

  @Post('units/all')
  @Idempotent()
  async all(@Body() body: Labelled) {
    await Promise.all(
      ['a', 'b', 'c'].map((part) =>
        this.dataSource.transaction(async (manager) => {
          await manager.insert(UserRow, { label: `${body.label}:${part}` });
          await manager.transaction((inner) => inner.insert(UserRow, { label: `${body.label}:${part}:inner` }));
        }),
      ),
    );
    return { label: body.label };
  }

  /** Asks for a SERIALIZABLE transaction, which a savepoint of the request's cannot be. */
  @Post('units/serializable')
  @Idempotent()
  async serializable(@Body() body: Labelled) {
    await this.dataSource.transaction('SERIALIZABLE', (manager) => manager.insert(UserRow, { label: body.label }));
    return { label: body.label };
  }

  /**
   * Inside dataSource.transaction(), inserts, catches the unique violation and
   * returns: PostgreSQL ends that transaction as a rollback at its COMMIT,
   * which resolves. The write after it commits.
   */
  @Post('units/caught-inside')
  @Idempotent()
  async caughtInside(@Body() body: Labelled) {
    const caught = await this.dataSource.transaction(async (manager) => {
      await manager.insert(UserRow, { label: `${body.label}:inside` });
      try {
        await manager.insert(UserRow, { label: body.label });
        return 'no violation';
      } catch (error) {
        if (!(error instanceof QueryFailedError)) throw error;
        return 'caught';
      }
    });
    await this.rows.insert({ label: `${body.label}:after` });
    return { caught };
  }

  /**
   * Moves its transaction to the tenant's schema, as an app with a schema
   * per tenant does (`SET LOCAL search_path`, or `set_config(…, true)`),
   * writes its row there, then adds an event once that transaction ended.
   */
  @Post('tenant-schema/:how')
  @Idempotent()
  async tenantSchema(@Body() body: Labelled, @Req() req: { params: { how: string } }) {
    await this.dataSource.transaction(async (manager) => {
      if (req.params.how === 'set-local') await manager.query(`SET LOCAL search_path TO ${TENANT_SCHEMA}`);
      else await manager.query(`SELECT set_config('search_path', $1, true)`, [TENANT_SCHEMA]);
      await manager.insert(UserRow, { label: body.label });
    });
    await this.outbox.add({ type: 'tenant', payload: body });
    return { label: body.label };
  }

  /** Inserts `body.count` rows one by one, as a loop of repository calls does: each a unit of the request's transaction. */
  @Post('row-by-row')
  @Idempotent()
  async rowByRow(@Body() body: Labelled & { count: number }) {
    for (let row = 0; row < body.count; row++) await this.rows.insert({ label: `${body.label}:${row}` });
    return { inserted: body.count };
  }

  /** Inserts, catches the unique violation, and carries on. */
  @Post('catch')
  @Idempotent()
  async catchAndContinue(@Body() body: Labelled) {
    try {
      await this.rows.insert({ label: body.label });
    } catch (error) {
      if (!(error instanceof QueryFailedError)) throw error;
    }
    await this.rows.insert({ label: `${body.label}:after` });
    return { label: body.label };
  }

  /** Adds an audit row through a writer whose timer this request may start, then holds and maybe fails. */
  @Post('audit/:writer')
  @Idempotent()
  async audit(@Body() body: Labelled, @Req() req: { params: { writer: string } }) {
    (req.params.writer === 'detached' ? this.detached : this.inheriting).add(body.label);
    await sleep(body.holdMs ?? 0);
    if (body.fail) throw new Error('failed after auditing');
    return { label: body.label };
  }

  @Post('audit/:writer/plain')
  @HttpCode(200)
  plainAudit(@Body() body: Labelled, @Req() req: { params: { writer: string } }) {
    (req.params.writer === 'detached' ? this.detached : this.inheriting).add(body.label);
    return { label: body.label };
  }

  /** Each execution answers a status of its own, as a handler may. */
  @Post('status-per-run')
  @Idempotent({ wait: 5000 })
  async statusPerRun(@Body() body: Labelled, @Res({ passthrough: true }) res: AnyResponse) {
    const execution = (providerCalls.get(body.label) ?? 0) + 1;
    providerCalls.set(body.label, execution);
    res.status(200 + execution);
    await sleep(30);
    return { label: body.label };
  }

  /** A row whose deferred trigger fails at COMMIT with SQLSTATE 22012. */
  @Post('divide-at-commit')
  @Idempotent()
  async divideAtCommit(@Body() body: Labelled) {
    await this.rows.insert({ label: body.label });
    return { label: body.label };
  }
}

/** A multipart upload parsed by FileInterceptor, bound inside @Idempotent() as docs/http-contract.md advises (Express). */
@Controller('user-code')
class UploadController {
  @Post('upload')
  @UseInterceptors(FileInterceptor('file'))
  @Idempotent()
  upload(@UploadedFile() file: { size: number; originalname: string }, @Body() body: { amount: string }) {
    return { name: file.originalname, size: file.size, amount: body.amount };
  }
}

type Imports = NonNullable<ModuleMetadata['imports']>;

/** The same upload on Fastify, read in the handler through @fastify/multipart (registered on the app), as its README shows. */
@Controller('user-code')
class FastifyUploadController {
  @Post('upload')
  @Idempotent()
  async upload(@Req() req: { file(): Promise<{ filename: string; fields: Record<string, { value?: unknown }>; toBuffer(): Promise<Buffer> }> }) {
    const file = await req.file();
    const content = await file.toBuffer();
    return { name: file.filename, size: content.length, amount: file.fields.amount?.value };
  }
}

/** The app's modules: TypeORM on `url` with a pool of `poolSize`, then `modules` (the idempotency and outbox modules), then the user code. */
export function userCodeModules(url: string, adapter: HttpAdapterName, poolSize: number, modules: Imports): Imports {
  @Module({
    imports: [TypeOrmModule.forFeature([UserRow])],
    controllers: [UserCodeController, adapter === 'express' ? UploadController : FastifyUploadController],
    providers: [InheritingAuditWriter, DetachedAuditWriter],
  })
  class UserCodeModule {}

  return [
    TypeOrmModule.forRoot({ type: 'postgres', url, entities: [IdempotencyRecord, UserRow], migrations: idempotencyMigrations, migrationsRun: true, extra: { max: poolSize } }),
    ...modules,
    UserCodeModule,
  ];
}
