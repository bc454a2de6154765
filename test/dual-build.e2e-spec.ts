import { Body, Controller, Inject, Injectable, Module, Post } from '@nestjs/common';
import { getRepositoryToken, TypeOrmModule } from '@nestjs/typeorm';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import request from 'supertest';
import { Column, Entity, PrimaryGeneratedColumn, type Repository } from 'typeorm';
import { startApp, type RunningApp } from './support/http-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

type Library = typeof import('../src/idempotency/index.js');

/** The entry points of the package's `exports`, as each build's `default` names them (npm run build writes both). */
const ENTRY_POINTS = ['index', 'metrics', 'client', 'nats', 'tracing', 'testing'];
const entryOf = (format: 'esm' | 'cjs', name: string) => resolve('dist/lib', format, `${name}.js`);

/**
 * Loads both builds' entry points in a fresh Node process, `first` before the
 * other, and returns, per entry point, the exports whose values differ
 * between the two.
 */
async function differingExports(first: 'esm' | 'cjs'): Promise<Record<string, string[]>> {
  const script = `
    import { createRequire } from 'node:module';
    import 'reflect-metadata';
    const require = createRequire(import.meta.url);
    const load = { esm: (file) => import(file), cjs: async (file) => require(file) };
    const entries = ${JSON.stringify(ENTRY_POINTS.map((name) => ({ name, esm: pathToFileURL(entryOf('esm', name)).href, cjs: entryOf('cjs', name) })))};
    const order = ${JSON.stringify(first === 'esm' ? ['esm', 'cjs'] : ['cjs', 'esm'])};
    const differing = {};
    for (const entry of entries) {
      const [a, b] = [await load[order[0]](entry[order[0]]), await load[order[1]](entry[order[1]])];
      differing[entry.name] = Object.keys(a).filter((name) => a[name] !== b[name]);
    }
    console.log(JSON.stringify(differing));
  `;
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], { cwd: process.cwd() });
  return JSON.parse(stdout);
}

/**
 * An app can load both builds of the package: its ES modules import it while
 * a CommonJS dependency or test helper requires it. Whichever loads first is
 * the one both hand out (scripts/lib-entries.mjs), so there is one
 * IdempotencyModule, one IdempotencyTransactionHost, one set of tokens and one
 * AsyncLocalStorage of the request's transaction.
 */
describe('an app that loads both builds of the package', () => {
  it.each(['esm', 'cjs'] as const)('gets the same exports from both when the %s build loads first', async (first) => {
    const none = Object.fromEntries(ENTRY_POINTS.map((name) => [name, []]));
    expect(await differingExports(first)).toEqual(none);
  });

  // The startup check reads them as the file it runs in resolves them: ES modules have no require(), CommonJS no import.meta.
  it.each(['esm', 'cjs'] as const)('finds the installed Nest and TypeORM from the %s build', async (format) => {
    const file = resolve('dist/lib', format, 'src/idempotency/module/installed-versions.js');
    const script = `import(${JSON.stringify(pathToFileURL(file).href)}).then((m) => console.log(JSON.stringify(m.installedVersions())))`;
    const { stdout } = await promisify(execFile)(process.execPath, ['-e', script]);
    const versionOf = (name: string) => JSON.parse(readFileSync(resolve('node_modules', name, 'package.json'), 'utf8')).version;
    expect(JSON.parse(stdout)).toEqual({ '@nestjs/common': versionOf('@nestjs/common'), '@nestjs/core': versionOf('@nestjs/core'), typeorm: versionOf('typeorm') });
  });

  describe('a route decorated through the CommonJS build, served by the module of the ES one', () => {
    let db: TestDatabase;
    let running: RunningApp;
    let executions = 0;
    let esm: Library;
    let cjs: Library;
    const count = async (label: string) => Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM dual_build_notes WHERE label = $1`, [label]))[0].n);
    const post = (key: string, body: { label: string; fail?: boolean }) => request(running.url).post('/notes').set('Idempotency-Key', key).send(body);

    beforeAll(async () => {
      esm = await import(pathToFileURL(entryOf('esm', 'index')).href);
      cjs = createRequire(import.meta.url)(entryOf('cjs', 'index'));
      db = await createTestDatabase();
      await db.query(`CREATE TABLE dual_build_notes (id serial PRIMARY KEY, label text NOT NULL, via text NOT NULL)`);

      @Entity({ name: 'dual_build_notes' })
      class Note {
        @PrimaryGeneratedColumn()
        id: number;

        @Column('text')
        label: string;

        @Column('text')
        via: string;
      }

      @Injectable()
      class Notes {
        constructor(
          @Inject(getRepositoryToken(Note)) private readonly repository: Repository<Note>,
          @Inject(cjs.IdempotencyTransactionHost) private readonly tx: InstanceType<Library['IdempotencyTransactionHost']>,
        ) {}

        /** One write through the CommonJS build's IdempotencyTransactionHost, one through the injected repository (the join). */
        async write(label: string) {
          await this.tx.manager.insert(Note, { label, via: 'transaction-host' });
          await this.repository.insert({ label, via: 'repository' });
        }
      }

      @Controller('notes')
      class NotesController {
        constructor(@Inject(Notes) private readonly notes: Notes) {}

        @Post()
        @cjs.Idempotent()
        async create(@Body() body: { label: string; fail?: boolean }) {
          executions++;
          await this.notes.write(body.label);
          if (body.fail) throw new Error('failed after writing');
          return { label: body.label, execution: executions };
        }
      }

      @Module({ imports: [TypeOrmModule.forFeature([Note])], controllers: [NotesController], providers: [Notes] })
      class NotesModule {}

      running = await startApp({
        imports: [
          TypeOrmModule.forRoot({ type: 'postgres', url: db.url, entities: [esm.IdempotencyRecord, Note], migrations: esm.idempotencyMigrations, migrationsRun: true }),
          esm.IdempotencyModule.forRoot({ tenant: 'shared', reaper: false }),
          NotesModule,
        ],
      });
    });
    afterAll(async () => {
      await running?.close();
      await db?.drop();
    });

    it('runs the handler once for a key and replays its answer', async () => {
      const before = executions;
      const first = await post('dual-1', { label: 'once' });
      const replay = await post('dual-1', { label: 'once' });
      expect(first.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(first.text);
      expect(executions - before).toBe(1);
      expect(await count('once')).toBe(2);
    });

    it('rolls back the writes joined through the CommonJS IdempotencyTransactionHost and the repository when the handler throws', async () => {
      expect((await post('dual-2', { label: 'thrown', fail: true })).status).toBe(500);
      expect(await count('thrown')).toBe(0);
    });

    it('answers the module’s problem documents for the CommonJS decorator’s route', async () => {
      const reused = await post('dual-1', { label: 'other' });
      expect(reused.status).toBe(422);
      expect(reused.headers['content-type']).toMatch(/^application\/problem\+json/);
    });
  });
});
