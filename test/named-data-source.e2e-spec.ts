import { Injectable, Module, type OnApplicationShutdown } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { getDataSourceToken } from '@nestjs/typeorm';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { type AttemptEvent, IdempotencyConfigurationError, IdempotencyModule, type IdempotencyModuleOptions, IdempotencyReaper, IdempotencyRecord, idempotencyMigrations } from '../src/idempotency/index.js';
import { AbandonedClaimsCompleter } from '../src/idempotency/phases/index.js';
import { HTTP_ADAPTERS, startApp, type RunningApp } from './support/http-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { type NoteBody, WRITE_PATHS, writePathsApp, writePathsTypeOrm, WRITTEN_NOTES_SCHEMA } from './support/write-paths-app.js';

const OPTIONS: IdempotencyModuleOptions = { tenant: 'shared', reaper: false, replayCacheSize: 0 };

/**
 * An app whose only DataSource is a named connection ('main'): the module
 * serves it everywhere (claim, fast replay, phased flow, reaper, completer),
 * and writes through it join the claim's transaction.
 */
describe.each(HTTP_ADAPTERS)('a named DataSource (%s)', (adapter) => {
  let db: TestDatabase;
  let keySeq = 0;
  const newKey = () => `named-${++keySeq}-${Date.now()}`;
  const unique = (label: string) => `${label}-${adapter}-${++keySeq}`;
  const notesLabelled = async (label: string) => Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM written_notes WHERE label = $1`, [label]))[0].n);
  const recordOf = async (key: string) => (await db.query<{ status: string }>(`SELECT status FROM idempotency_records WHERE key = $1`, [key]))[0];
  const post = (running: RunningApp, path: string, key: string, body: NoteBody) =>
    Promise.resolve(request(running.url).post(path).set('Idempotency-Key', key).send(body));
  const app = writePathsApp('main');
  /** The app's only connection, pipelined (the other suite of write paths runs without). */
  const mainConnection = () => writePathsTypeOrm(db.url, { name: 'main', pipeline: true });

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(WRITTEN_NOTES_SCHEMA);
  });
  afterAll(async () => {
    await db?.drop();
  });

  describe('given by its connection name to forRoot()', () => {
    let running: RunningApp;
    const events: AttemptEvent[] = [];

    beforeAll(async () => {
      const onEvent: IdempotencyModuleOptions['onEvent'] = (event) => event.kind === 'attempt' && events.push(event);
      running = await startApp(
        { imports: [mainConnection(), IdempotencyModule.forRoot({ ...OPTIONS, dataSource: 'main', onEvent }), app.module] },
        { adapter },
      );
    });
    afterAll(async () => {
      await running?.close();
    });

    it('has no default DataSource to fall back on', () => {
      expect(() => running.app.get(DataSource, { strict: false })).toThrow();
    });

    it.each(WRITE_PATHS)('joins a write through %s to the claim’s transaction', async (path) => {
      const label = unique(`thrown-${path}`);
      expect((await post(running, `/writes/${path}`, newKey(), { label, fail: true })).status).toBe(500);
      expect(await notesLabelled(label)).toBe(0);
    });

    it('commits a write through @InjectRepository(Entity, "main") with the record, and replays it, by a claim and then by a plain read', async () => {
      const label = unique('replayed');
      const key = newKey();
      const first = await post(running, '/writes/injected-repository', key, { label });
      expect(first.status).toBe(201);
      expect(await recordOf(key)).toEqual({ status: 'completed' });
      events.length = 0;
      for (let i = 0; i < 5; i++) {
        const replay = await post(running, '/writes/injected-repository', key, { label });
        expect(replay.headers['idempotent-replayed']).toBe('true');
        expect(replay.text).toBe(first.text);
      }
      expect(await notesLabelled(label)).toBe(1);
      expect(events.map((event) => event.outcome)).toEqual(Array(5).fill('replayed'));
      expect(events[0].claimMs).toBeDefined(); // a claim that found the key held
      expect(events[4].claimMs).toBeUndefined(); // the fast replay read, from the pool of 'main'
    });

    it('runs a phased operation on it', async () => {
      const label = unique('phased');
      const key = newKey();
      expect((await post(running, '/writes/phased', key, { label })).status).toBe(201);
      expect(await recordOf(key)).toEqual({ status: 'completed' });
      expect(await notesLabelled(`phase:${label}`)).toBe(1);
    });

    it('reaps and completes abandoned claims on it', async () => {
      const key = newKey();
      await db.query(
        `INSERT INTO idempotency_records (scope, operation, key, fingerprint, status, created_at, expires_at, response_status)
         VALUES ('anonymous', 'reaped', $1, 'f', 'completed', now() - interval '2 days', now() - interval '1 day', 201)`,
        [key],
      );
      await db.query(
        `INSERT INTO idempotency_records (scope, operation, key, fingerprint, status, created_at, expires_at, owner_token, lease_expires_at)
         VALUES ('anonymous', 'abandoned', $1, 'f', 'in_progress', now(), now() + interval '1 day', gen_random_uuid(), now() - interval '1 second')`,
        [key],
      );
      expect(await running.app.get(AbandonedClaimsCompleter).completeAbandoned()).toMatchObject({ discarded: 1 });
      expect((await running.app.get(IdempotencyReaper).reap()).deleted).toBeGreaterThanOrEqual(1);
      expect(await recordOf(key)).toBeUndefined();
    });
  });

  it('takes the name from forRootAsync() options', async () => {
    const running = await startApp(
      { imports: [mainConnection(), IdempotencyModule.forRootAsync({ useFactory: () => ({ ...OPTIONS, dataSource: 'main' }) }), app.module] },
      { adapter },
    );
    try {
      const label = unique('async');
      expect((await post(running, '/writes/injected-repository', newKey(), { label, fail: true })).status).toBe(500);
      expect(await notesLabelled(label)).toBe(0);
    } finally {
      await running.close();
    }
  });

  it('takes the DataSource’s injection token, e.g. getDataSourceToken("main")', async () => {
    const running = await startApp(
      { imports: [mainConnection(), IdempotencyModule.forRoot({ ...OPTIONS, dataSource: getDataSourceToken('main') }), app.module] },
      { adapter },
    );
    try {
      const label = unique('token');
      expect((await post(running, '/writes/injected-repository', newKey(), { label, fail: true })).status).toBe(500);
      expect(await notesLabelled(label)).toBe(0);
    } finally {
      await running.close();
    }
  });

  it('serves a DataSource that an app provides itself under a symbol, without @nestjs/typeorm', async () => {
    const ANALYTICS = Symbol('analytics-data-source');
    @Injectable()
    class AnalyticsDataSource implements OnApplicationShutdown {
      readonly dataSource = new DataSource({ type: 'postgres', url: db.url, entities: [IdempotencyRecord], migrations: idempotencyMigrations, migrationsRun: true });
      onApplicationShutdown() {
        return this.dataSource.destroy();
      }
    }
    @Module({
      providers: [AnalyticsDataSource, { provide: ANALYTICS, useFactory: (owner: AnalyticsDataSource) => owner.dataSource.initialize(), inject: [AnalyticsDataSource] }],
      exports: [ANALYTICS],
    })
    class AnalyticsModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AnalyticsModule, IdempotencyModule.forRoot({ ...OPTIONS, dataSource: ANALYTICS })] }).compile();
    const nest = moduleRef.createNestApplication({ logger: false });
    try {
      await nest.init();
      expect((await nest.get(IdempotencyReaper).reap()).skipped).toBe(false);
    } finally {
      await nest.close();
    }
  });

  it('refuses at startup a name no DataSource has, saying how to fix it', async () => {
    const moduleRef = await Test.createTestingModule({ imports: [mainConnection(), IdempotencyModule.forRoot({ ...OPTIONS, dataSource: 'replica' })] }).compile();
    const nest = moduleRef.createNestApplication({ logger: false });
    try {
      const error = await nest.init().then(() => undefined, (failure: unknown) => failure);
      expect(error).toBeInstanceOf(IdempotencyConfigurationError);
      expect((error as Error).message).toMatch(/"replica"/);
    } finally {
      await nest.close();
    }
  });
});
