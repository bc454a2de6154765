import { CommitScopedState, type OwnQuery } from './commit-scoped-state.js';

/** A unit's state over a fake connection: what the module reads and sends for it. */
function unit({ isolation = 'READ COMMITTED', deferred = [] as string[] } = {}) {
  const state = new CommitScopedState(isolation as 'READ COMMITTED', deferred);
  const read: unknown[] = [];
  const sent: string[] = [];
  const query: OwnQuery = async (sql, parameters) => {
    if (sql.startsWith('SELECT n AS name')) {
      read.push(...(parameters![0] as string[]));
      return (parameters![0] as string[]).map((name) => ({ name, value: name === 'app.tenant' ? null : `before:${name}` }));
    }
    sent.push(`${sql} ${JSON.stringify(parameters)}`);
    return [];
  };
  const send = async (statements: string[]) => {
    sent.push(...statements);
  };
  return { state, read, sent, before: (sql: string, parameters?: unknown[]) => state.before(sql, parameters, query), end: () => state.end(query, send) };
}

describe('what a unit’s own COMMIT would have ended', () => {
  it.each([
    ['INSERT INTO "orders"("id") VALUES ($1)', []],
    ['UPDATE "orders" SET "status" = $1 WHERE "id" = $2', []],
    ['SET LOCAL search_path TO tenant_x', ['search_path']],
    ['set local statement_timeout = 100', ['statement_timeout']],
    ['SET LOCAL ROLE reader', ['role']],
    ['SET LOCAL TIME ZONE UTC', ['timezone']],
    ["SELECT set_config('app.tenant', $1, true)", ['app.tenant']],
    ["SELECT set_config('search_path', current_setting('search_path') || ', x', true)", ['search_path']],
    ['SELECT set_config($1, $2, $3)', ['app.user']],
    ["SELECT set_config('app.session', 'kept', false)", []],
  ])('%s: reads %j first', async (sql, names) => {
    const { before, read, state } = unit();
    await before(sql, ['app.user', 'v', true]);
    expect(read).toEqual(names);
    expect(state.hasEnd).toBe(names.length > 0);
  });

  it('refuses a set_config() whose name or scope it cannot read, rather than leave the setting on', async () => {
    const { before } = unit();
    await expect(before("SELECT set_config(name, 'x', true) FROM settings")).rejects.toThrow(/set_config\(\)/);
    await expect(before("SELECT set_config('app.x', 'x', is_local) FROM flags")).rejects.toThrow(/set_config\(\)/);
  });

  it('puts settings back as they were before the unit, one it created as empty', async () => {
    const { before, end, sent } = unit();
    await before('SET LOCAL search_path TO tenant_x');
    await before("SELECT set_config('app.tenant', 'acme', true)");
    await end();
    expect(sent).toEqual([`SELECT set_config(n, v, true) FROM unnest($1::text[], $2::text[]) AS s(n, v) ${JSON.stringify([['search_path', 'app.tenant'], ['before:search_path', '']])}`]);
  });

  it('drops ON COMMIT DROP tables and empties ON COMMIT DELETE ROWS ones', async () => {
    const { before, end, sent } = unit();
    await before('CREATE TEMP TABLE Scratch (id int) ON COMMIT DROP');
    await before('CREATE TEMPORARY TABLE IF NOT EXISTS "Keep Me" (id int) ON COMMIT DELETE ROWS');
    await end();
    expect(sent).toEqual(['DROP TABLE IF EXISTS pg_temp."scratch"', 'DELETE FROM pg_temp."Keep Me"']);
  });

  it('checks deferred constraints at the end of every unit where the database has some, and defers them again', async () => {
    const { end, sent, state } = unit({ deferred: ['"public"."one_label"'] });
    expect(state.hasEnd).toBe(true);
    await end();
    expect(sent).toEqual(['SET CONSTRAINTS ALL IMMEDIATE', 'SET CONSTRAINTS "public"."one_label" DEFERRED']);
  });

  it('checks them from a SET CONSTRAINTS on, where the database has none deferred initially', async () => {
    const { before, end, sent, state } = unit();
    expect(state.hasEnd).toBe(false);
    await before('SET CONSTRAINTS ALL DEFERRED');
    await end();
    expect(sent).toEqual(['SET CONSTRAINTS ALL IMMEDIATE']);
  });

  it.each([
    ['READ COMMITTED', 'READ COMMITTED', true],
    ['SERIALIZABLE', 'REPEATABLE READ', true],
    ['READ COMMITTED', 'SERIALIZABLE', false],
    ['REPEATABLE READ', 'READ UNCOMMITTED', true],
  ])('at %s, answers SET TRANSACTION ISOLATION LEVEL %s itself (%s), or refuses it naming the route option', async (isolation, asked, answered) => {
    const { before } = unit({ isolation });
    const looked = before(`SET TRANSACTION ISOLATION LEVEL ${asked}`);
    if (answered) await expect(looked).resolves.toEqual({ sql: 'SELECT WHERE false' });
    else await expect(looked).rejects.toThrow(`@Idempotent({ isolation: '${asked}' })`);
  });
});
