import {
  type ArgumentsHost,
  Body,
  type CallHandler,
  Catch,
  type CanActivate,
  type DynamicModule,
  ClassSerializerInterceptor,
  Controller,
  type ExceptionFilter,
  type ExecutionContext,
  HttpException,
  Injectable,
  type LoggerService,
  Module,
  type NestInterceptor,
  Post,
  type Provider,
  type Type,
  UseFilters,
  UseGuards,
  UseInterceptors,
  Redirect,
  Render,
  Res,
  Version,
  VersioningType,
} from '@nestjs/common';
import { APP_INTERCEPTOR, Reflector } from '@nestjs/core';
import { EventPattern } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { Exclude } from 'class-transformer';
import type { Observable } from 'rxjs';
import request from 'supertest';
import { Idempotent, IdempotencyConfigurationError, IdempotencyModule, type IdempotencyModuleOptions } from '../src/idempotency/index.js';
import { IdempotencyMessagingModule } from '../src/idempotency/messaging/index.js';
import { IdempotencyPhasesModule } from '../src/idempotency/phases/index.js';
import { HTTP_ADAPTERS, startApp, type RunningApp } from './support/http-app.js';
import { LEDGER_SCHEMA, Ledger, ledgerAppModules, type LedgerDataSourceOptions } from './support/ledger-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

class Account {
  @Exclude()
  readonly passwordHash = 'never-sent';

  constructor(
    readonly id: number,
    readonly label: string,
  ) {}
}

/** Leaves bodies alone: the kind of interceptor an app vouches for. */
@Injectable()
class RequestCounter implements NestInterceptor {
  static seen = 0;
  intercept(_context: ExecutionContext, next: CallHandler): Observable<unknown> {
    RequestCounter.seen++;
    return next.handle();
  }
}

@Controller('accounts')
class AccountsController {
  constructor(private readonly ledger: Ledger) {}

  // Written above @Idempotent(), so it runs inside it: the module records the serialised account.
  @Post()
  @UseInterceptors(ClassSerializerInterceptor)
  @Idempotent()
  async create(@Body() body: { label: string }) {
    const { entry } = await this.ledger.write(body.label);
    return new Account(entry, body.label);
  }
}

@Module({ controllers: [AccountsController], providers: [Ledger] })
class AccountsModule {}

/** Stands in for authentication: `X-User` becomes `req.user`. */
@Injectable()
class UserFromHeader implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest();
    const user = request.headers['x-user'];
    if (user) request.user = { id: user };
    return true;
  }
}

@UseGuards(UserFromHeader)
@Controller('notes')
class NotesController {
  constructor(private readonly ledger: Ledger) {}

  @Post('a')
  @Idempotent()
  a(@Body() body: { label: string }) {
    return this.ledger.write(body.label);
  }

  @Post('b')
  @Idempotent()
  b(@Body() body: { label: string }) {
    return this.ledger.write(body.label);
  }

  @Post('c')
  @Idempotent()
  c(@Body() body: { label: string }) {
    return this.ledger.write(body.label);
  }
}

@Module({ controllers: [NotesController], providers: [Ledger, UserFromHeader] })
class NotesModule {}

/** One handler on two paths: a refund and a charge, told apart by the path alone. */
@Controller('payments')
class TwoPathsController {
  constructor(private readonly ledger: Ledger) {}

  @Post(['refund', 'charge'])
  @Idempotent()
  move(@Body() body: { label: string }) {
    return this.ledger.write(body.label);
  }
}

@Controller('payments')
class NamedTwoPathsController {
  constructor(private readonly ledger: Ledger) {}

  @Post(['refund', 'charge'])
  @Idempotent({ operation: 'payment moves' })
  move(@Body() body: { label: string }) {
    return this.ledger.write(body.label);
  }
}

/** Two controllers on one path, told apart by host: their derived operations are the same. */
@Controller({ path: 'orders', host: 'shop.example' })
class ShopOrdersController {
  constructor(private readonly ledger: Ledger) {}

  @Post()
  @Idempotent()
  create(@Body() body: { label: string }) {
    return this.ledger.write(body.label);
  }
}

@Controller({ path: 'orders', host: 'admin.example' })
class AdminOrdersController {
  constructor(private readonly ledger: Ledger) {}

  @Post()
  @Idempotent()
  create(@Body() body: { label: string }) {
    return this.ledger.write(body.label);
  }
}

/** Two versions of one route, on one path under header versioning. */
@Controller('quotes')
class QuotesController {
  constructor(private readonly ledger: Ledger) {}

  @Post()
  @Version('1')
  @Idempotent()
  async v1(@Body() body: { label: string }) {
    return { version: 1, ...(await this.ledger.write(body.label)) };
  }

  @Post()
  @Version('2')
  @Idempotent()
  async v2(@Body() body: { label: string }) {
    return { version: 2, ...(await this.ledger.write(body.label)) };
  }
}

@Module({ controllers: [QuotesController], providers: [Ledger] })
class QuotesModule {}

@Controller('pages')
class RenderedController {
  @Post()
  @Render('page')
  @Idempotent()
  show() {
    return { who: 'world' };
  }
}

@Controller('refunds')
class RefundsController {
  @Post()
  @Idempotent({ phases: true })
  refund(@Body() body: { label: string }) {
    return body;
  }
}

@Controller()
class ShipmentsConsumer {
  @EventPattern('shipments.requested')
  @Idempotent()
  requested(shipment: { id: string }) {
    return { shipped: shipment.id };
  }
}

@Controller('moves')
class RedirectingController {
  @Post()
  @Redirect('/moves/default', 302)
  @Idempotent()
  move() {
    return { url: '/moves/elsewhere', statusCode: 303 };
  }
}

/** The Nest docs' catch-all filter: every error as JSON with its status, 500 for what is not an HttpException. */
@Catch()
class EveryErrorFilter implements ExceptionFilter {
  catch(error: unknown, host: ArgumentsHost): void {
    const status = error instanceof HttpException ? error.getStatus() : 500;
    host.switchToHttp().getResponse().status(status).json({ caughtBy: 'EveryErrorFilter', status });
  }
}

@Controller('filtered')
class FilterAboveController {
  @Post()
  @UseFilters(EveryErrorFilter)
  @Idempotent()
  accept(@Res({ passthrough: true }) response: { status(code: number): void }) {
    response.status(202);
    return { accepted: true };
  }
}

@Controller('filtered')
class FilterBelowController {
  constructor(private readonly ledger: Ledger) {}

  @Post()
  @Idempotent()
  @UseFilters(EveryErrorFilter)
  async accept(@Body() body: { label: string }, @Res({ passthrough: true }) response: { status(code: number): void }) {
    response.status(202);
    return this.ledger.write(body.label);
  }
}

@Module({ controllers: [FilterBelowController], providers: [Ledger] })
class FilterBelowModule {}

/** A feature module that imports the module again, with a tenant resolver the root's import lacks. */
@Module({ imports: [IdempotencyModule.forRoot({ tenant: (request: { headers: Record<string, string> }) => request.headers['x-tenant'] })] })
class TransfersFeatureModule {}

/** Stands in for a body parser that leaves objects referring to themselves on request.body (@fastify/multipart's attachFieldsToBody: true). */
@Injectable()
class SelfReferringBody implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const part: Record<string, unknown> = { type: 'field', value: 'x' };
    const body = { note: part };
    part.fields = body;
    context.switchToHttp().getRequest().body = body;
    return true;
  }
}

@Controller('fastify')
class FastifyRepliesController {
  constructor(private readonly ledger: Ledger) {}

  /** Takes the reply from Fastify and writes the raw response itself. */
  @Post('hijack')
  @Idempotent()
  async hijack(@Body() body: { label: string }, @Res({ passthrough: true }) reply: { hijack(): void; raw: { writeHead(status: number): void; end(text: string): void } }) {
    await this.ledger.write(body.label);
    reply.hijack();
    reply.raw.writeHead(200);
    reply.raw.end('hijacked');
  }

  /** Sends the reply itself and returns it, as Fastify's async handlers may: Fastify's reply settles once sent. */
  @Post('return-send')
  @Idempotent()
  async returnSend(@Body() body: { label: string }, @Res({ passthrough: true }) reply: { status(code: number): { send(payload: unknown): unknown } }) {
    await this.ledger.write(body.label);
    return reply.status(201).send({ sent: true });
  }

  @Post('return-redirect')
  @Idempotent()
  async returnRedirect(@Body() body: { label: string }, @Res({ passthrough: true }) reply: { redirect(url: string): unknown }) {
    await this.ledger.write(body.label);
    return reply.redirect('/elsewhere');
  }

  @Post('null')
  @Idempotent()
  async nothing(@Body() body: { label: string }) {
    await this.ledger.write(body.label);
    return null;
  }

  @Post('self-referring')
  @UseGuards(SelfReferringBody)
  @Idempotent()
  selfReferring() {
    return { ran: true };
  }
}

@Module({ controllers: [FastifyRepliesController], providers: [Ledger, SelfReferringBody] })
class FastifyRepliesModule {}

/** Keeps the errors it is given. */
class ErrorLog implements LoggerService {
  readonly errors: string[] = [];
  log(): void {}
  warn(): void {}
  error(message: unknown, ...rest: unknown[]): void {
    this.errors.push([message, ...rest].map((part) => (part instanceof Error ? part.message : String(part))).join(' '));
  }
}

/** Keeps the warnings it is given; drops the rest. */
class WarningLog implements LoggerService {
  readonly warnings: Array<{ message: string; context: string }> = [];
  log(): void {}
  error(): void {}
  warn(message: string, context: string): void {
    this.warnings.push({ message, context });
  }
}

describe('@Idempotent() routes, checked at startup', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  interface Boot {
    controllers?: Array<Type<unknown>>;
    providers?: Provider[];
    /** Modules to import besides the ledger app's. */
    imports?: Array<Type<unknown> | DynamicModule>;
    options?: Partial<IdempotencyModuleOptions>;
    /** Global interceptors to add with app.useGlobalInterceptors(), before init. */
    globals?: (reflector: Reflector) => NestInterceptor[];
    logger?: LoggerService;
    dataSource?: LedgerDataSourceOptions;
  }

  async function boot({ controllers = [AccountsController], providers = [], imports = [], options = {}, globals, logger, dataSource }: Boot): Promise<Error | undefined> {
    const [typeorm, idempotency] = ledgerAppModules(db.url, options, dataSource);
    const moduleRef = await Test.createTestingModule({ imports: [typeorm, idempotency, ...imports], controllers, providers: [Ledger, ...providers] }).compile();
    const app = moduleRef.createNestApplication({ logger: logger ?? false });
    try {
      if (globals) app.useGlobalInterceptors(...globals(app.get(Reflector)));
      await app.init();
      return undefined;
    } catch (error) {
      return error as Error;
    } finally {
      await app.close();
    }
  }

  it('refuses a ClassSerializerInterceptor added with app.useGlobalInterceptors(), and says how to fix it', async () => {
    const error = await boot({ globals: (reflector) => [new ClassSerializerInterceptor(reflector)] });
    expect(error).toBeInstanceOf(IdempotencyConfigurationError);
    expect(error?.message).toContain('ClassSerializerInterceptor is global (app.useGlobalInterceptors() or APP_INTERCEPTOR) and wraps POST /accounts');
    expect(error?.message).toContain('@UseInterceptors(ClassSerializerInterceptor) written above @Idempotent()');
    expect(error?.message).toContain('allowInterceptorsAround: [ClassSerializerInterceptor]');
  });

  it('refuses a ClassSerializerInterceptor registered as APP_INTERCEPTOR', async () => {
    const error = await boot({ providers: [{ provide: APP_INTERCEPTOR, useClass: ClassSerializerInterceptor }] });
    expect(error).toBeInstanceOf(IdempotencyConfigurationError);
    expect(error?.message).toContain('ClassSerializerInterceptor is global');
  });

  it('starts with any other global interceptor, warning once until the app vouches for it', async () => {
    const unvouched = new WarningLog();
    expect(await boot({ providers: [{ provide: APP_INTERCEPTOR, useClass: RequestCounter }], logger: unvouched })).toBeUndefined();
    const warnings = unvouched.warnings.filter(({ context }) => context === 'Idempotency');
    expect(warnings).toHaveLength(1);
    expect(warnings[0].message).toContain('RequestCounter runs around @Idempotent() routes');
    expect(warnings[0].message).toContain('allowInterceptorsAround: [RequestCounter]');

    const vouched = new WarningLog();
    expect(await boot({ providers: [{ provide: APP_INTERCEPTOR, useClass: RequestCounter }], options: { allowInterceptorsAround: [RequestCounter] }, logger: vouched })).toBeUndefined();
    const counter = new RequestCounter();
    expect(await boot({ globals: () => [counter], options: { allowInterceptorsAround: [counter] }, logger: vouched })).toBeUndefined();
    expect(vouched.warnings.filter(({ context }) => context === 'Idempotency')).toEqual([]);
  });

  it('warns once when idle_in_transaction_session_timeout is on for the DataSource’s connections, naming its value and the fix', async () => {
    const log = new WarningLog();
    expect(await boot({ logger: log, dataSource: { extra: { options: '-c idle_in_transaction_session_timeout=1500' } } })).toBeUndefined();
    const warnings = log.warnings.filter(({ context }) => context === 'Idempotency');
    expect(warnings).toHaveLength(1);
    expect(warnings[0].message).toMatch(/^idle_in_transaction_session_timeout is 1500ms on the served DataSource's connections/);
    expect(warnings[0].message).toContain('Raise or unset it for the app');
    expect(warnings[0].message).toContain('@Idempotent({ phases: true })');
  });

  it('refuses a subclass of ClassSerializerInterceptor too', async () => {
    class StrictSerializer extends ClassSerializerInterceptor {}
    const error = await boot({ globals: (reflector) => [new StrictSerializer(reflector)] });
    expect(error?.message).toContain('StrictSerializer is global');
  });

  it('leaves global interceptors alone in an app without @Idempotent() routes', async () => {
    @Controller('plain')
    class PlainController {
      @Post()
      create() {
        return {};
      }
    }
    expect(await boot({ controllers: [PlainController], globals: (reflector) => [new ClassSerializerInterceptor(reflector)] })).toBeUndefined();
  });

  it('refuses an interceptor written below @Idempotent() on the handler, which runs around it', async () => {
    @Controller('below')
    class BelowController {
      @Post()
      @Idempotent()
      @UseInterceptors(ClassSerializerInterceptor)
      create() {
        return {};
      }
    }
    const error = await boot({ controllers: [BelowController] });
    expect(error).toBeInstanceOf(IdempotencyConfigurationError);
    expect(error?.message).toContain('BelowController.create: @UseInterceptors(ClassSerializerInterceptor) is written below @Idempotent(), so it runs around it: write it above');
  });

  it('refuses an interceptor bound on the class around a handler’s @Idempotent(), and starts with it inside a class-level one', async () => {
    @UseInterceptors(ClassSerializerInterceptor)
    @Controller('outside')
    class OutsideController {
      @Post()
      @Idempotent()
      create() {
        return {};
      }
    }
    const error = await boot({ controllers: [OutsideController] });
    expect(error?.message).toContain('OutsideController.create: ClassSerializerInterceptor is bound on the class');

    @UseInterceptors(ClassSerializerInterceptor)
    @Idempotent()
    @Controller('inside')
    class InsideController {
      @Post()
      create() {
        return {};
      }
    }
    expect(await boot({ controllers: [InsideController] })).toBeUndefined();
  });

  it('refuses @Render() and @Redirect(), which read the handler’s result after the module has recorded it as text', async () => {
    const rendered = await boot({ controllers: [RenderedController] });
    expect(rendered).toBeInstanceOf(IdempotencyConfigurationError);
    expect(rendered?.message).toContain('@Idempotent() on RenderedController.show: @Render() passes the handler');
    const redirecting = await boot({ controllers: [RedirectingController] });
    expect(redirecting).toBeInstanceOf(IdempotencyConfigurationError);
    expect(redirecting?.message).toContain('@Idempotent() on RedirectingController.move: @Redirect() reads its URL');
    expect(redirecting?.message).toContain('a Location header');
  });

  it('refuses a catch-all exception filter that Nest would ask before the module’s, and starts with it written below @Idempotent()', async () => {
    const error = await boot({ controllers: [FilterAboveController] });
    expect(error).toBeInstanceOf(IdempotencyConfigurationError);
    expect(error?.message).toContain('@Idempotent() on FilterAboveController.accept: EveryErrorFilter catches every error and Nest asks it before the module');
    expect(error?.message).toContain('Write @UseFilters(EveryErrorFilter) below @Idempotent()');
    expect(await boot({ controllers: [FilterBelowController] })).toBeUndefined();
  });

  it('refuses @Idempotent() on a message handler without IdempotencyMessagingModule, which serves them, and starts with it', async () => {
    const error = await boot({ controllers: [ShipmentsConsumer] });
    expect(error).toBeInstanceOf(IdempotencyConfigurationError);
    expect(error?.message).toContain('@Idempotent() on ShipmentsConsumer.requested, a message handler: import IdempotencyMessagingModule from \'nest-idempotency/messaging\'');
    expect(await boot({ controllers: [ShipmentsConsumer], imports: [IdempotencyMessagingModule] })).toBeUndefined();
  });

  it('refuses a phased route without IdempotencyPhasesModule, which serves them, and starts with it', async () => {
    const error = await boot({ controllers: [RefundsController] });
    expect(error).toBeInstanceOf(IdempotencyConfigurationError);
    expect(error?.message).toContain("@Idempotent() on RefundsController.refund, a phased route: import IdempotencyPhasesModule from 'nest-idempotency/phases'");
    expect(await boot({ controllers: [RefundsController], imports: [IdempotencyPhasesModule] })).toBeUndefined();
  });

  it('refuses a second IdempotencyModule.forRoot() whose options would be ignored, naming who imports it', async () => {
    const error = await boot({ imports: [TransfersFeatureModule] });
    expect(error).toBeInstanceOf(IdempotencyConfigurationError);
    expect(error?.message).toContain('IdempotencyModule is imported 2 times with different options (by ');
    expect(error?.message).toContain('TransfersFeatureModule');
    expect(error?.message).toContain('Import IdempotencyModule.forRoot() once, in the root module');
  });

  it('refuses a handler that serves several paths under one derived operation, and starts once the operation is named', async () => {
    const error = await boot({ controllers: [TwoPathsController] });
    expect(error).toBeInstanceOf(IdempotencyConfigurationError);
    expect(error?.message).toContain('TwoPathsController.move: the handler serves several paths (/payments/refund, /payments/charge)');
    expect(error?.message).toContain("@Idempotent({ operation: '…' })");
    expect(await boot({ controllers: [NamedTwoPathsController] })).toBeUndefined();
  });

  it('refuses two handlers whose derived operations are the same, naming both', async () => {
    const error = await boot({ controllers: [ShopOrdersController, AdminOrdersController] });
    expect(error).toBeInstanceOf(IdempotencyConfigurationError);
    expect(error?.message).toContain('@Idempotent() on AdminOrdersController.create and on ShopOrdersController.create: both have the operation "POST /orders"');
  });
});

describe.each(HTTP_ADAPTERS)('guardrails at run time (%s)', (adapter) => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(LEDGER_SCHEMA);
  });
  afterAll(async () => {
    await db?.drop();
  });

  async function start(imports: unknown[], options: { logger?: LoggerService; globals?: NestInterceptor[] } = {}): Promise<RunningApp> {
    return startApp({ imports: imports as Array<Type<unknown>> }, { adapter, logger: options.logger, configure: (app) => app.useGlobalInterceptors(...(options.globals ?? [])) });
  }

  it('serialises through a ClassSerializerInterceptor inside @Idempotent(), and replays the same bytes, under a vouched-for global interceptor', async () => {
    const [typeorm, idempotency] = ledgerAppModules(db.url, { allowInterceptorsAround: [RequestCounter] });
    const running = await start([typeorm, idempotency, AccountsModule], { globals: [new RequestCounter()] });
    try {
      const seen = RequestCounter.seen;
      const send = () => request(running.url).post('/accounts').set('X-Tenant', 'acme').set('Idempotency-Key', `account-${adapter}`).send({ label: `account-${adapter}` });
      const first = await send();
      const replay = await send();
      expect(first.status).toBe(201);
      expect(first.body).toEqual({ id: expect.any(Number), label: `account-${adapter}` });
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(first.text);
      expect(RequestCounter.seen).toBe(seen + 2);
    } finally {
      await running.close();
    }
  });

  it('gives each API version of a route its own operation: a key sent to version 1 runs version 2 afresh', async () => {
    const [typeorm, idempotency] = ledgerAppModules(db.url);
    const running = await startApp(
      { imports: [typeorm, idempotency, QuotesModule] },
      { adapter, configure: (app) => app.enableVersioning({ type: VersioningType.HEADER, header: 'X-Api-Version' }) },
    );
    try {
      const send = (version: string) =>
        request(running.url).post('/quotes').set('X-Api-Version', version).set('X-Tenant', 'acme').set('Idempotency-Key', `${adapter}-quote`).send({ label: `quote-${adapter}` });
      const first = await send('1');
      const second = await send('2');
      expect([first.status, first.body.version]).toEqual([201, 1]);
      expect([second.status, second.body.version, second.headers['idempotent-replayed']]).toEqual([201, 2, undefined]);
      expect((await send('1')).text).toBe(first.text);
    } finally {
      await running.close();
    }
  });

  it('sends and replays a body with its content type when replayHeaders leaves Content-Type out', async () => {
    const [typeorm, idempotency] = ledgerAppModules(db.url, { replayHeaders: ['Location'], tenant: 'shared' });
    const running = await start([typeorm, idempotency, NotesModule]);
    try {
      const send = () => request(running.url).post('/notes/a').set('Idempotency-Key', `${adapter}-typed`).send({ label: `typed-${adapter}` });
      const first = await send();
      const replay = await send();
      expect([first.status, first.headers['content-type']]).toEqual([201, 'application/json; charset=utf-8']);
      expect([replay.headers['idempotent-replayed'], replay.headers['content-type'], replay.text]).toEqual(['true', first.headers['content-type'], first.text]);
    } finally {
      await running.close();
    }
  });

  it('answers and replays a 202 through a catch-all filter written below @Idempotent()', async () => {
    const [typeorm, idempotency] = ledgerAppModules(db.url);
    const running = await start([typeorm, idempotency, FilterBelowModule]);
    try {
      const send = () => request(running.url).post('/filtered').set('X-Tenant', 'acme').set('Idempotency-Key', `${adapter}-filtered`).send({ label: `filtered-${adapter}` });
      const first = await send();
      const replay = await send();
      expect([first.status, replay.status, replay.headers['idempotent-replayed'], replay.text]).toEqual([202, 202, 'true', first.text]);
    } finally {
      await running.close();
    }
  });

  it.runIf(adapter === 'express')('writes JSON with the Express app’s json spaces and json escape settings, as res.json() would', async () => {
    const [typeorm, idempotency] = ledgerAppModules(db.url, { tenant: 'shared' });
    const running = await startApp(
      { imports: [typeorm, idempotency, NotesModule] },
      { adapter, configure: (app) => Object.entries({ 'json spaces': 2, 'json escape': true }).forEach(([name, value]) => app.getHttpAdapter().getInstance().set(name, value)) },
    );
    try {
      const send = () => request(running.url).post('/notes/a').set('Idempotency-Key', 'json-settings').send({ label: '<b>settings</b>' });
      const first = await send();
      const replay = await send();
      expect(first.status).toBe(201);
      expect(first.text).toBe(JSON.stringify(first.body, null, 2).replace(/</g, '\\u003c').replace(/>/g, '\\u003e'));
      expect([replay.headers['idempotent-replayed'], replay.text]).toEqual(['true', first.text]);
    } finally {
      await running.close();
    }
  });

  it('answers a handler that hijacks the reply 500 (unstorable-response), its writes rolled back, rather than never answer', async () => {
    const [typeorm, idempotency] = ledgerAppModules(db.url, { tenant: 'shared' });
    const running = await start([typeorm, idempotency, FastifyRepliesModule]);
    try {
      const label = `hijack-${adapter}`;
      const answer = await request(running.url).post('/fastify/hijack').set('Idempotency-Key', label).send({ label }).timeout(5000);
      if (adapter === 'fastify') {
        expect([answer.status, answer.body.type]).toEqual([500, 'urn:nest-idempotency:problem:unstorable-response']);
        expect(answer.body.detail).toContain('reply.hijack()');
      } else {
        // Express's response has no hijack(): the handler fails, and so do its writes.
        expect(answer.status).toBe(500);
      }
      expect(await db.query(`SELECT label FROM ledger_entries WHERE label = $1`, [label])).toEqual([]);
    } finally {
      await running.close();
    }
  });

  it.each(['return-send', 'return-redirect'])('answers a handler that returns the reply it wrote (%s) 500 (unstorable-response) at once, its writes rolled back, rather than wait for good', async (route) => {
    const [typeorm, idempotency] = ledgerAppModules(db.url, { tenant: 'shared' });
    const running = await start([typeorm, idempotency, FastifyRepliesModule]);
    try {
      const label = `${route}-${adapter}`;
      const answer = await request(running.url).post(`/fastify/${route}`).set('Idempotency-Key', label).send({ label }).timeout(5000);
      expect([answer.status, answer.body.type]).toEqual([500, 'urn:nest-idempotency:problem:unstorable-response']);
      expect(await db.query(`SELECT label FROM ledger_entries WHERE label = $1`, [label])).toEqual([]);
    } finally {
      await running.close();
    }
  });

  it('sends a null result as the adapter does without the module: JSON null on Fastify, an empty body on Express', async () => {
    const [typeorm, idempotency] = ledgerAppModules(db.url, { tenant: 'shared' });
    const running = await start([typeorm, idempotency, FastifyRepliesModule]);
    try {
      const send = () => request(running.url).post('/fastify/null').set('Idempotency-Key', `null-${adapter}`).send({ label: `null-${adapter}` });
      const first = await send();
      const replay = await send();
      expect(first.status).toBe(201);
      expect(first.text).toBe(adapter === 'fastify' ? 'null' : '');
      if (adapter === 'fastify') expect(first.headers['content-type']).toBe('application/json; charset=utf-8');
      expect([replay.headers['idempotent-replayed'], replay.text, replay.headers['content-type']]).toEqual(['true', first.text, first.headers['content-type']]);
    } finally {
      await running.close();
    }
  });

  it('answers a request body that refers to itself 500 and logs the cause and the fix, rather than blame the client with 400', async () => {
    const log = new ErrorLog();
    const [typeorm, idempotency] = ledgerAppModules(db.url, { tenant: 'shared' });
    const running = await start([typeorm, idempotency, FastifyRepliesModule], { logger: log });
    try {
      const answer = await request(running.url).post('/fastify/self-referring').set('Idempotency-Key', `self-${adapter}`).send({});
      expect(answer.status).toBe(500);
      expect(log.errors.join('\n')).toContain("attachFieldsToBody: 'keyValues'");
    } finally {
      await running.close();
    }
  });

  it('warns once per handler when requests carry req.user and tenant is \'shared\'', async () => {
    const log = new WarningLog();
    const [typeorm, idempotency] = ledgerAppModules(db.url, { tenant: 'shared' });
    const running = await start([typeorm, idempotency, NotesModule], { logger: log });
    try {
      const send = (path: string, user: string | undefined, key: string) => {
        const req = request(running.url).post(path).set('Idempotency-Key', `${adapter}-${key}`);
        if (user) req.set('X-User', user);
        return req.send({ label: key });
      };
      for (const [path, user, key] of [
        ['/notes/a', 'ann', 'a1'],
        ['/notes/a', 'bob', 'a2'],
        ['/notes/a', 'ann', 'a3'],
        ['/notes/b', 'bob', 'b1'],
        ['/notes/b', 'bob', 'b2'],
        ['/notes/c', undefined, 'c1'],
      ] as const) {
        expect((await send(path, user, key)).status).toBe(201);
      }
      const warnings = log.warnings.filter(({ context }) => context === 'Idempotency');
      expect(warnings.map(({ message }) => message.split(':')[0]).sort()).toEqual(['POST /notes/a (NotesController.a)', 'POST /notes/b (NotesController.b)']);
      expect(warnings[0].message).toContain('IdempotencyModule.forRoot({ tenant: (request) => request.user.tenantId })');
    } finally {
      await running.close();
    }
  });

  it('does not warn when a tenant resolver is configured', async () => {
    const log = new WarningLog();
    const [typeorm, idempotency] = ledgerAppModules(db.url, { tenant: (request: { user?: { id: string } }) => request.user?.id });
    const running = await start([typeorm, idempotency, NotesModule], { logger: log });
    try {
      const response = await request(running.url).post('/notes/a').set('Idempotency-Key', `${adapter}-tenant`).set('X-User', 'ann').send({ label: 'tenant' });
      expect(response.status).toBe(201);
      expect(log.warnings.filter(({ context }) => context === 'Idempotency')).toEqual([]);
    } finally {
      await running.close();
    }
  });
});
