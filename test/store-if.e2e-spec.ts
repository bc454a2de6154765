import { Body, Controller, HttpException, Module, Post, type Type } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { Idempotent, IdempotencyConfigurationError } from '../src/idempotency/index.js';
import { IdempotencyPhasesModule, PhasedClaim } from '../src/idempotency/phases/index.js';
import { adaptersWithDrivers } from './support/claim-drivers.js';
import { startApp, type RunningApp } from './support/http-app.js';
import { LEDGER_SCHEMA, Ledger, ledgerAppModules } from './support/ledger-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

/** Every status the predicates were asked about, to show which failures reach them. */
const asked: number[] = [];

/** A 409 is final only when the handler says so; a 402 always is. */
const finalFailure = (status: number, error: HttpException) => {
  asked.push(status);
  return status === 402 || (status === 409 && (error.getResponse() as { code?: string }).code === 'already-settled');
};

@Controller('claims')
class ClaimsController {
  constructor(private readonly ledger: Ledger) {}

  @Post()
  @Idempotent({ storeIf: finalFailure })
  settle(@Body() body: { label: string }) {
    return this.ledger.write(body.label);
  }

  @Post('anything')
  @Idempotent({ storeIf: (status) => (asked.push(status), true) })
  anything(@Body() body: { label: string }) {
    return this.ledger.write(body.label);
  }
}

@Module({ controllers: [ClaimsController], providers: [Ledger] })
class ClaimsModule {}

describe.each(adaptersWithDrivers(1))('storeIf (%s)', (_run, adapter, driver) => {
  let db: TestDatabase;
  let running: RunningApp;
  let ledger: Ledger;
  let keySeq = 0;
  const newKey = () => `store-if-${adapter}-${++keySeq}`;
  const post = (path: string, key: string, label: string) => request(running.url).post(path).set('Idempotency-Key', key).set('X-Tenant', 'acme').send({ label });
  const entriesLabelled = async (label: string) => Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM ledger_entries WHERE label = $1`, [label]))[0].n);
  const recordsOf = (key: string) => db.query<{ status: string }>(`SELECT status FROM idempotency_records WHERE key = $1`, [key]);

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(LEDGER_SCHEMA);
    const [typeorm, idempotency] = ledgerAppModules(db.url, driver.options, driver.dataSource);
    running = await startApp({ imports: [typeorm, idempotency, ClaimsModule] }, { adapter });
    ledger = running.app.get(Ledger);
  });
  beforeEach(() => {
    ledger.script.length = 0;
    asked.length = 0;
  });
  afterAll(async () => {
    await running?.close();
    await db?.drop();
  });

  it.each([
    ['a 409 the predicate selects', new HttpException({ code: 'already-settled', message: 'Already settled' }, 409)],
    ['a 402', new HttpException({ code: 'card_declined', message: 'Card declined' }, 402)],
  ])('records %s, undoes the handler’s writes and replays it', async (_case, failure) => {
    const key = newKey();
    const label = `selected-${key}`;
    ledger.script.push({ fail: failure });
    const calls = ledger.calls;
    const first = await post('/claims', key, label);
    expect(first.status).toBe(failure.getStatus());
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    expect(await entriesLabelled(label)).toBe(0);
    expect(await recordsOf(key)).toEqual([{ status: 'completed' }]);

    const replay = await post('/claims', key, label);
    expect(replay.status).toBe(failure.getStatus());
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(first.text);
    expect(ledger.calls).toBe(calls + 1);
  });

  it.each([
    ['a 409 the predicate does not select', new HttpException({ code: 'locked', message: 'Try again' }, 409)],
    ['a 404', new HttpException('not yet', 404)],
  ])('records nothing after %s, so the retry runs again', async (_case, failure) => {
    const key = newKey();
    const label = `unselected-${key}`;
    ledger.script.push({ fail: failure });
    expect((await post('/claims', key, label)).status).toBe(failure.getStatus());
    expect(await recordsOf(key)).toEqual([]);
    const retry = await post('/claims', key, label);
    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBeUndefined();
    expect(await entriesLabelled(label)).toBe(1);
    expect(asked).toEqual([failure.getStatus()]);
  });

  it.each([
    ['an HttpException with a 5xx status', new HttpException('upstream down', 503)],
    ['an error that is not an HttpException', new Error('connection reset')],
  ])('never records %s, even when the predicate takes everything', async (_case, failure) => {
    const key = newKey();
    const label = `server-error-${key}`;
    ledger.script.push({ fail: failure });
    const first = await post('/claims/anything', key, label);
    expect(first.status).toBe(failure instanceof HttpException ? failure.getStatus() : 500);
    expect(await recordsOf(key)).toEqual([]);
    expect(await entriesLabelled(label)).toBe(0);
    const retry = await post('/claims/anything', key, label);
    expect(retry.status).toBe(201);
    expect(await entriesLabelled(label)).toBe(1);
    expect(asked).toEqual([]);
  });
});

describe('storeIf configuration', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  async function boot(controller: Type<unknown>): Promise<Error | undefined> {
    const [typeorm, idempotency] = ledgerAppModules(db.url);
    const moduleRef = await Test.createTestingModule({ imports: [typeorm, idempotency, IdempotencyPhasesModule], controllers: [controller] }).compile();
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

  it('refuses storeErrors and storeIf on one route', async () => {
    @Controller('both')
    class BothController {
      @Post()
      @Idempotent({ storeErrors: [402], storeIf: (status) => status === 409 })
      create() {
        return {};
      }
    }
    const error = await boot(BothController);
    expect(error).toBeInstanceOf(IdempotencyConfigurationError);
    expect(error?.message).toMatch(/BothController\.create: give storeErrors or storeIf, not both/);
  });

  it('refuses storeIf on a phased route, whose abandoned operations the reaper finishes without the route', async () => {
    @Controller('phased')
    class PhasedController {
      @Post()
      @Idempotent({ phases: true, storeIf: (status) => status === 402 })
      create(@PhasedClaim() claim: PhasedClaim) {
        return claim;
      }
    }
    const error = await boot(PhasedController);
    expect(error).toBeInstanceOf(IdempotencyConfigurationError);
    expect(error?.message).toMatch(/a phased route takes storeErrors, not storeIf/);
  });
});
