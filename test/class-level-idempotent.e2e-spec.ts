import { Body, Controller, Delete, Get, HttpException, Module, Param, Patch, Post, Put, Res, type Type } from '@nestjs/common';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { Idempotent, IdempotencyConfigurationError, SkipIdempotency } from '../src/idempotency/index.js';
import { HTTP_ADAPTERS, startApp, type RunningApp } from './support/http-app.js';
import { LEDGER_SCHEMA, Ledger, ledgerAppModules } from './support/ledger-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

interface CartBody {
  label: string;
}

@Idempotent({ version: '2', storeErrors: [402] })
@Controller('carts')
class CartsController {
  constructor(private readonly ledger: Ledger) {}

  @Post()
  create(@Body() body: CartBody) {
    return this.ledger.write(body.label);
  }

  @Put(':id')
  replace(@Body() body: CartBody) {
    return this.ledger.write(body.label);
  }

  @Patch(':id')
  update(@Body() body: CartBody) {
    return this.ledger.write(body.label);
  }

  @Delete(':id')
  remove(@Body() body: CartBody) {
    return this.ledger.write(body.label);
  }

  @Get(':id')
  find(@Param('id') id: string) {
    return this.ledger.write(`get:${id}`);
  }

  @Post(':id/checkout')
  @Idempotent({ required: false, storeErrors: [409] })
  checkout(@Body() body: CartBody) {
    return this.ledger.write(body.label);
  }

  @Post('preview')
  @SkipIdempotency()
  preview(@Body() body: CartBody) {
    return this.ledger.write(body.label);
  }
}

@Module({ controllers: [CartsController], providers: [Ledger] })
class CartsModule {}

describe.each(HTTP_ADAPTERS)('class-level @Idempotent() (%s)', (adapter) => {
  let db: TestDatabase;
  let running: RunningApp;
  let ledger: Ledger;
  let keySeq = 0;
  const newKey = () => `cart-${adapter}-${++keySeq}`;
  const send = (method: 'post' | 'put' | 'patch' | 'delete' | 'get', path: string, key: string | undefined, label: string) => {
    const req = request(running.url)[method](path).set('X-Tenant', 'acme');
    if (key !== undefined) req.set('Idempotency-Key', key);
    return method === 'get' ? req : req.send({ label });
  };
  const entriesLabelled = async (label: string) => Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM ledger_entries WHERE label = $1`, [label]))[0].n);
  const recordsOf = (key: string) => db.query<{ scope: string; operation: string; status: string }>(`SELECT scope, operation, status FROM idempotency_records WHERE key = $1`, [key]);

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(LEDGER_SCHEMA);
    const [typeorm, idempotency] = ledgerAppModules(db.url);
    running = await startApp({ imports: [typeorm, idempotency, CartsModule] }, { adapter });
    ledger = running.app.get(Ledger);
  });
  afterEach(() => {
    ledger.script.length = 0;
  });
  afterAll(async () => {
    await running?.close();
    await db?.drop();
  });

  it.each([
    ['post', '/carts', 201, 'POST /carts'],
    ['put', '/carts/c1', 200, 'PUT /carts/:id'],
    ['patch', '/carts/c1', 200, 'PATCH /carts/:id'],
    ['delete', '/carts/c1', 200, 'DELETE /carts/:id'],
  ] as const)('covers %s %s: runs once, replays, requires a key, with the class’s options', async (method, path, status, operation) => {
    const key = newKey();
    const label = `${method}-${key}`;
    expect((await send(method, path, undefined, label)).status).toBe(400);
    const first = await send(method, path, key, label);
    expect(first.status).toBe(status);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const replay = await send(method, path, key, label);
    expect(replay.status).toBe(status);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(first.text);
    expect(await entriesLabelled(label)).toBe(1);
    expect(await recordsOf(key)).toEqual([{ scope: 'tenant:acme version:2', operation, status: 'completed' }]);
  });

  it('records the failures the class’s storeErrors lists', async () => {
    const key = newKey();
    ledger.script.push({ fail: new HttpException('declined', 402) });
    expect((await send('post', '/carts', key, key)).status).toBe(402);
    const replay = await send('post', '/carts', key, key);
    expect(replay.status).toBe(402);
    expect(replay.headers['idempotent-replayed']).toBe('true');
  });

  it('leaves GET alone: no key needed, and a key neither records nor replays', async () => {
    const key = newKey();
    expect((await send('get', '/carts/g1', undefined, '')).status).toBe(200);
    const first = await send('get', '/carts/g1', key, '');
    const second = await send('get', '/carts/g1', key, '');
    expect([first.status, second.status]).toEqual([200, 200]);
    expect(second.headers['idempotent-replayed']).toBeUndefined();
    expect(await entriesLabelled('get:g1')).toBe(3);
    expect(await recordsOf(key)).toEqual([]);
  });

  it('lets a handler’s own @Idempotent() override the class’s options one by one, and runs the flow once', async () => {
    const label = `checkout-${newKey()}`;
    // required: false is the handler's: without a key the handler runs unprotected.
    expect((await send('post', '/carts/c1/checkout', undefined, label)).status).toBe(201);
    expect(await entriesLabelled(label)).toBe(1);

    const key = newKey();
    const first = await send('post', '/carts/c1/checkout', key, label);
    const replay = await send('post', '/carts/c1/checkout', key, label);
    expect(first.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(first.text);
    expect(await entriesLabelled(label)).toBe(2);
    // version '2' is the class's, kept where the handler does not set it.
    expect(await recordsOf(key)).toEqual([{ scope: 'tenant:acme version:2', operation: 'POST /carts/:id/checkout', status: 'completed' }]);
  });

  it('takes the handler’s storeErrors in place of the class’s', async () => {
    const declined = newKey();
    ledger.script.push({ fail: new HttpException('declined', 402) });
    expect((await send('post', '/carts/c1/checkout', declined, declined)).status).toBe(402);
    expect(await recordsOf(declined)).toEqual([]);

    const conflict = newKey();
    ledger.script.push({ fail: new HttpException('sold out', 409) });
    expect((await send('post', '/carts/c1/checkout', conflict, conflict)).status).toBe(409);
    expect(await recordsOf(conflict)).toEqual([expect.objectContaining({ status: 'completed' })]);
  });

  it('leaves a handler with @SkipIdempotency() out', async () => {
    const key = newKey();
    const label = `preview-${key}`;
    expect((await send('post', '/carts/preview', undefined, label)).status).toBe(201);
    const first = await send('post', '/carts/preview', key, label);
    const second = await send('post', '/carts/preview', key, label);
    expect([first.status, second.status]).toEqual([201, 201]);
    expect(second.headers['idempotent-replayed']).toBeUndefined();
    expect(await entriesLabelled(label)).toBe(3);
    expect(await recordsOf(key)).toEqual([]);
  });

  it('documents the routes it covers in OpenAPI, and only those', () => {
    const document = SwaggerModule.createDocument(running.app, new DocumentBuilder().build());
    const keyHeader = (operation: { parameters?: unknown[] } | undefined) =>
      (operation?.parameters ?? []).find((parameter) => (parameter as { name?: string }).name === 'Idempotency-Key') as { required?: boolean } | undefined;
    const paths = document.paths;
    for (const operation of [paths['/carts'].post, paths['/carts/{id}'].put, paths['/carts/{id}'].patch, paths['/carts/{id}'].delete]) {
      expect(keyHeader(operation)).toMatchObject({ required: true });
      expect(operation!.responses['422']).toBeDefined();
    }
    expect(keyHeader(paths['/carts/{id}/checkout'].post)).toMatchObject({ required: false });
    expect(keyHeader(paths['/carts/{id}'].get)).toBeUndefined();
    expect(keyHeader(paths['/carts/preview'].post)).toBeUndefined();
  });
});

describe('class-level @Idempotent() at startup', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  async function boot(controller: Type<unknown>): Promise<Error | undefined> {
    const [typeorm, idempotency] = ledgerAppModules(db.url);
    const moduleRef = await Test.createTestingModule({ imports: [typeorm, idempotency], controllers: [controller] }).compile();
    const app = moduleRef.createNestApplication({ logger: false });
    try {
      await app.init();
      return undefined;
    } catch (error) {
      return error as Error;
    } finally {
      await app.close();
    }
  }

  it('checks the handlers it covers, as the validator checks a handler’s own @Idempotent()', async () => {
    @Idempotent()
    @Controller('raw')
    class RawController {
      @Get()
      status(@Res() response: { send(body: string): void }) {
        response.send('fine: GET is not covered');
      }

      @Post()
      create(@Res() response: { send(body: string): void }) {
        response.send('done');
      }
    }
    const error = await boot(RawController);
    expect(error).toBeInstanceOf(IdempotencyConfigurationError);
    expect(error?.message).toContain('@Idempotent() on the class RawController, covering create: a handler that writes the response itself');
    expect(error?.message).toContain('Or leave the handler out with @SkipIdempotency().');
  });

  it('refuses options that name one handler’s work on a class', async () => {
    @Idempotent({ operation: 'create-cart' })
    @Controller('named')
    class NamedController {
      @Post()
      create() {
        return {};
      }
    }
    const error = await boot(NamedController);
    expect(error).toBeInstanceOf(IdempotencyConfigurationError);
    expect(error?.message).toMatch(/class NamedController: operation names one handler's work/);
  });

  it('refuses @Idempotent() and @SkipIdempotency() on one handler', async () => {
    @Idempotent()
    @Controller('torn')
    class TornController {
      @Post()
      @Idempotent({ version: '3' })
      @SkipIdempotency()
      create() {
        return {};
      }
    }
    const error = await boot(TornController);
    expect(error?.message).toMatch(/TornController\.create has both @Idempotent\(\) and @SkipIdempotency\(\)/);
  });
});
