import { ConflictException, type MiddlewareConsumer, type Type, ValidationPipe } from '@nestjs/common';
import { IsString } from 'class-validator';
import type { Request, Response } from 'express';
import { AsyncLocalStorage } from 'node:async_hooks';
import { type EntitySubscriberInterface, EventSubscriber } from 'typeorm';
import { countRows, eventually, FAITHFUL_ROWS_SCHEMA, type FaithfulApp, FaithfulRow, type HandlerContext, outboxLib, type PairedRoute, send, startFaithfulApp, type Twin, TWINS, uniqueLabel } from '../support/faithful-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

/** The label of the request a hook fired in: set for the requests that send `X-Hook-Label`. */
const hookRequests = new AsyncLocalStorage<string>();
/** Each TypeORM transaction hook fired, by request label, and whether the label's row was visible from another connection then. */
const hooksFired = new Map<string, Array<{ hook: 'commit' | 'rollback'; visible: boolean }>>();
/** Whether a row with the label is visible from a connection of the test's own. */
let visibleElsewhere: (label: string) => Promise<boolean>;

async function recordHook(hook: 'commit' | 'rollback'): Promise<void> {
  const label = hookRequests.getStore();
  if (label === undefined) return;
  const visible = await visibleElsewhere(label);
  hooksFired.set(label, [...(hooksFired.get(label) ?? []), { hook, visible }]);
}

/** What an app that sends mail or publishes events after a commit registers. */
@EventSubscriber()
class TransactionHooks implements EntitySubscriberInterface {
  afterTransactionCommit(): Promise<void> {
    return recordHook('commit');
  }

  afterTransactionRollback(): Promise<void> {
    return recordHook('rollback');
  }
}

/** Runs the routes' requests that carry `X-Hook-Label` with it as their hooks' label. */
function labelHooks(consumer: MiddlewareConsumer, controllers: Type[]): void {
  consumer
    .apply((request: Request, _response: Response, next: () => void) => {
      const label = request.headers['x-hook-label'];
      return typeof label === 'string' ? hookRequests.run(label, next) : next();
    })
    .forRoutes(...controllers);
}

class NoteDto {
  @IsString()
  label: string;
}

const insertRow = (dataSource: HandlerContext['dataSource'], label: string, step: string | null = null) =>
  dataSource.query(`INSERT INTO faithful_rows (label, step) VALUES ($1, $2)`, [label, step]);

const ROUTES: PairedRoute[] = [
  {
    path: 'hooks/save',
    handle: async ({ repository }, { label }: { label: string }) => repository(FaithfulRow).save({ label }),
  },
  {
    path: 'hooks/committed-then-failed',
    handle: async ({ dataSource }, { label }: { label: string }) => {
      await dataSource.transaction((manager) => manager.query(`INSERT INTO faithful_rows (label) VALUES ($1)`, [label]));
      throw new Error('failed after its transaction committed');
    },
  },
  {
    path: 'state/search-path',
    handle: async ({ dataSource }, { label }: { label: string }) => {
      await dataSource.transaction(async (manager) => {
        await manager.query(`SET LOCAL search_path TO tenant_x`);
        await manager.query(`INSERT INTO tenant_notes (label) VALUES ($1)`, [label]);
      });
      return { label };
    },
  },
  {
    path: 'state/statement-timeout',
    handle: async ({ dataSource }) => {
      await dataSource.transaction((manager) => manager.query(`SET LOCAL statement_timeout = '100ms'`));
      await dataSource.query(`SELECT pg_sleep(0.3)`);
      return { slept: true };
    },
  },
  {
    path: 'state/temp-table',
    handle: async ({ dataSource }) => {
      const scratch = () =>
        dataSource.transaction(async (manager) => {
          await manager.query(`CREATE TEMP TABLE scratch (n int) ON COMMIT DROP`);
          await manager.query(`INSERT INTO scratch (n) VALUES (1)`);
        });
      await scratch();
      await scratch();
      return { scratched: 2 };
    },
  },
  {
    path: 'state/deferred-unique',
    handle: async ({ dataSource }, { seat }: { seat: string }) => {
      try {
        // Booked twice: the deferred unique constraint fails at the transaction's commit.
        await dataSource.transaction(async (manager) => {
          await manager.query(`INSERT INTO seats (seat) VALUES ($1)`, [seat]);
          await manager.query(`INSERT INTO seats (seat) VALUES ($1)`, [seat]);
        });
      } catch {
        throw new ConflictException('the seat is taken');
      }
      return { seat };
    },
  },
  {
    path: 'outside',
    handle: async ({ dataSource, tx }, { label }: { label: string }) => {
      await tx.outside(() => dataSource.transaction((manager) => manager.query(`INSERT INTO faithful_rows (label, step) VALUES ($1, 'audit')`, [label])));
      throw new Error('failed after its audit entry');
    },
  },
  {
    path: 'outbox',
    handle: async ({ dataSource, get }, { label }: { label: string }) => {
      await insertRow(dataSource, label, 'note');
      const refused: string[] = [];
      for (const note of ['a\u0000b', 'a lone \ud800 surrogate']) {
        try {
          await get(outboxLib.Outbox).add({ type: 'note.written', payload: { note } });
        } catch (error) {
          refused.push((error as Error).message);
        }
      }
      return { refused };
    },
  },
  { path: 'report', method: 'GET', handle: () => ({ report: 'monthly' }) },
  { path: 'validated', bodyPipes: [new ValidationPipe({ expectedType: NoteDto })], handle: (_context, { label }: NoteDto) => ({ label }) },
];

/**
 * Items 3, 4, 8 and 9 of issue 33, and what held in the same review: what
 * the app's own transactions promise (hooks at real commits and
 * rollbacks, settings and tables that end with them, deferred checks at
 * their end, a transaction of its own outside the request's) holds inside
 * an idempotent request, and the outbox refuses what PostgreSQL cannot
 * store. Each route runs twice, with `@Idempotent()` and without, through
 * the packed ES build.
 */
describe('what the app’s own transactions promise, inside an idempotent request', () => {
  let db: TestDatabase;
  let app: FaithfulApp;
  const rows = (label: string) => countRows(db, 'faithful_rows', 'label = $1', [label]);
  const bothTwins = (path: string, body: (twin: Twin) => object = () => ({})) => Promise.all(TWINS.map((twin) => send(app, path, twin, body(twin))));

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(`${FAITHFUL_ROWS_SCHEMA};
      CREATE SCHEMA tenant_x;
      CREATE TABLE tenant_x.tenant_notes (id serial PRIMARY KEY, label text NOT NULL);
      CREATE TABLE seats (id serial PRIMARY KEY, seat text NOT NULL, CONSTRAINT seats_seat_unique UNIQUE (seat) DEFERRABLE INITIALLY DEFERRED)`);
    visibleElsewhere = async (label) => (await rows(label)) > 0;
    app = await startFaithfulApp({
      db,
      routes: ROUTES,
      dataSource: { subscribers: [TransactionHooks] },
      imports: [outboxLib.IdempotencyOutboxModule.forRoot()],
      middleware: labelHooks,
    });
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  describe('TypeORM’s transaction hooks fire at the real boundaries', () => {
    const hooked = (path: string, twin: Twin, label: string) => send(app, path, twin, { label }, { headers: { 'X-Hook-Label': label } });
    const fired = (label: string, hook: 'commit' | 'rollback') => (hooksFired.get(label) ?? []).filter((entry) => entry.hook === hook);

    it('fires afterTransactionCommit for a committed repo.save(), once the row is visible to other connections', async () => {
      for (const twin of TWINS) {
        const label = uniqueLabel(`save-${twin}`);
        expect((await hooked('hooks/save', twin, label)).status).toBe(201);
        expect(await eventually(() => fired(label, 'commit').length > 0, 2000), `${twin}: afterTransactionCommit fired`).toBe(true);
        expect(fired(label, 'commit').every((entry) => entry.visible), `${twin}: the row was visible at each afterTransactionCommit`).toBe(true);
      }
    });

    it('fires afterTransactionRollback and no afterTransactionCommit for a transaction() of a request that then failed', async () => {
      const without = uniqueLabel('committed-then-failed-without');
      // Without the module the transaction() really commits, and its row stays.
      expect((await hooked('hooks/committed-then-failed', 'without', without)).status).toBe(500);
      expect(await eventually(() => fired(without, 'commit').length > 0, 2000)).toBe(true);
      const label = uniqueLabel('committed-then-failed-with');
      expect((await hooked('hooks/committed-then-failed', 'with', label)).status).toBe(500);
      expect(await eventually(() => fired(label, 'rollback').length > 0, 2000), 'afterTransactionRollback fired').toBe(true);
      expect(fired(label, 'commit')).toEqual([]);
      expect(await rows(label)).toBe(0);
    });
  });

  describe('transaction-scoped state ends where the app’s transaction ends', () => {
    it('runs a transaction() that sets SET LOCAL search_path to a tenant’s schema, and replays its answer', async () => {
      const label = uniqueLabel('search-path');
      const without = await send(app, 'state/search-path', 'without', { label: `${label}-without` });
      const first = await send(app, 'state/search-path', 'with', { label }, { key: `${label}:key` });
      const replay = await send(app, 'state/search-path', 'with', { label }, { key: `${label}:key` });
      expect([without.status, first.status]).toEqual([201, 201]);
      expect([replay.status, replay.headers['idempotent-replayed']]).toEqual([201, 'true']);
      expect(await countRows(db, 'tenant_x.tenant_notes', 'label = $1', [label])).toBe(1);
    });

    it('ends a SET LOCAL statement_timeout with its transaction(): a later statement of the handler runs as without the module', async () => {
      const [withModule, without] = await bothTwins('state/statement-timeout');
      expect(without.status).toBe(201);
      expect([withModule.status, withModule.body]).toEqual([without.status, without.body]);
    });

    it('drops a temporary table ON COMMIT DROP at the end of its transaction(), so a second one can create it, as without the module', async () => {
      const [withModule, without] = await bothTwins('state/temp-table');
      expect(without.status).toBe(201);
      expect([withModule.status, withModule.body]).toEqual([without.status, without.body]);
    });

    it('checks a deferred unique constraint at the end of its transaction(), where the handler catches it and answers 409, as without the module', async () => {
      const [withModule, without] = await bothTwins('state/deferred-unique', (twin) => ({ seat: uniqueLabel(`seat-${twin}`) }));
      expect(without.status).toBe(409);
      expect([withModule.status, withModule.body]).toEqual([without.status, without.body]);
    });
  });

  describe('a transaction of its own', () => {
    it('commits a transaction() started with IdempotencyTransactionHost.outside() even when the request then fails', async () => {
      const labels = { with: uniqueLabel('outside-with'), without: uniqueLabel('outside-without') };
      const answers = await bothTwins('outside', (twin) => ({ label: labels[twin] }));
      expect(answers.map((answer) => answer.status)).toEqual([500, 500]);
      expect([await rows(labels.with), await rows(labels.without)]).toEqual([1, 1]);
    });
  });

  describe('the outbox', () => {
    it('refuses an outbox payload PostgreSQL cannot store with an error naming the field, and the handler’s other writes commit', async () => {
      const labels = { with: uniqueLabel('outbox-with'), without: uniqueLabel('outbox-without') };
      const [withModule, without] = await bothTwins('outbox', (twin) => ({ label: labels[twin] }));
      // Without the module there is no request transaction to add events to: add() refuses, the write stays.
      expect([without.status, await rows(labels.without)]).toEqual([201, 1]);
      expect(withModule.status).toBe(201);
      expect(withModule.body.refused).toEqual([expect.stringMatching(/payload\.note/), expect.stringMatching(/payload\.note/)]);
      expect(await rows(labels.with)).toBe(1);
    });
  });

  describe('what held, and must keep holding', () => {
    it('answers HEAD on an idempotent GET as without the module', async () => {
      const [withModule, without] = await Promise.all(TWINS.map((twin) => send(app, 'report', twin, {}, { method: 'HEAD' })));
      expect(without.status).toBe(200);
      expect([withModule.status, withModule.headers['content-type']]).toEqual([without.status, without.headers['content-type']]);
    });

    it('does not record a ValidationPipe 400: the key then runs a valid body', async () => {
      for (const twin of TWINS) {
        const key = uniqueLabel(`validated-${twin}`);
        expect((await send(app, 'validated', twin, { label: 5 }, { key })).status).toBe(400);
        const valid = await send(app, 'validated', twin, { label: 'valid' }, { key });
        expect([valid.status, valid.body]).toEqual([201, { label: 'valid' }]);
      }
    });
  });
});
