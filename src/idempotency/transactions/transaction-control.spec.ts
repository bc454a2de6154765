import { scanStatements } from './statement-scanner.js';
import { effectOf } from './transaction-control.js';

describe('what a statement of the app’s does to the request’s transaction', () => {
  it.each([
    'INSERT INTO "orders"("label") VALUES ($1)',
    'SELECT * FROM "orders" WHERE "id" = $1 FOR UPDATE NOWAIT',
    'SAVEPOINT typeorm_1',
    'RELEASE SAVEPOINT typeorm_1',
    'ROLLBACK TO SAVEPOINT typeorm_1',
    'rollback to idempotency_unit',
    'ROLLBACK WORK TO SAVEPOINT mine',
    'SET LOCAL search_path TO tenant_a',
    'SET statement_timeout = 100',
    'SET TRANSACTION ISOLATION LEVEL SERIALIZABLE',
    'SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY',
    'PREPARE fetch_order AS SELECT 1',
    'DISCARD PLANS',
    'DISCARD TEMP',
    'START',
    "DO $$ BEGIN PERFORM 1; END $$",
    "INSERT INTO notes (body) VALUES ('BEGIN; COMMIT')",
    'UPDATE t SET "COMMIT" = 1',
    'commıt',
    'PREPARE transaction AS SELECT 1',
  ])('runs %s as it is', (sql) => {
    expect(effectOf(sql)).toBeUndefined();
  });

  it.each([
    ['BEGIN', { kind: 'begin', isolation: undefined, readOnly: false }],
    ['begin work', { kind: 'begin', isolation: undefined, readOnly: false }],
    ['START TRANSACTION', { kind: 'begin', isolation: undefined, readOnly: false }],
    ['START TRANSACTION ISOLATION LEVEL REPEATABLE READ', { kind: 'begin', isolation: 'REPEATABLE READ', readOnly: false }],
    ['BEGIN ISOLATION LEVEL read uncommitted, READ ONLY', { kind: 'begin', isolation: 'READ COMMITTED', readOnly: true }],
    ['  -- a comment\n/* and another */ BEGIN;', { kind: 'begin', isolation: undefined, readOnly: false }],
    ['COMMIT', { kind: 'commit', chain: false, spelled: 'COMMIT' }],
    ['commit work;', { kind: 'commit', chain: false, spelled: 'COMMIT' }],
    ['END TRANSACTION', { kind: 'commit', chain: false, spelled: 'END' }],
    ['COMMIT AND CHAIN', { kind: 'commit', chain: true, spelled: 'COMMIT' }],
    ['COMMIT AND NO CHAIN', { kind: 'commit', chain: false, spelled: 'COMMIT' }],
    ['ROLLBACK', { kind: 'rollback', chain: false, spelled: 'ROLLBACK' }],
    ['ABORT', { kind: 'rollback', chain: false, spelled: 'ABORT' }],
    ['ROLLBACK TRANSACTION AND CHAIN', { kind: 'rollback', chain: true, spelled: 'ROLLBACK' }],
  ])('reads %s as the start or end of a transaction', (sql, effect) => {
    expect(effectOf(sql)).toEqual(effect);
  });

  it.each([
    ["PREPARE TRANSACTION 'payment-1'", 'PREPARE TRANSACTION'],
    ["COMMIT PREPARED 'payment-1'", 'COMMIT PREPARED'],
    ["ROLLBACK PREPARED 'payment-1'", 'ROLLBACK PREPARED'],
    ["SET TRANSACTION SNAPSHOT '00000003-0000001B-1'", 'SET TRANSACTION SNAPSHOT'],
    ['DISCARD ALL', 'DISCARD ALL'],
    ['INSERT INTO t VALUES (1); COMMIT', 'several statements'],
    ['BEGIN; INSERT INTO t VALUES (1); COMMIT;', 'several statements'],
  ])('refuses %s, naming it and IdempotencyTransactionHost.outside()', (sql, named) => {
    const effect = effectOf(sql);
    expect(effect?.kind).toBe('refused');
    expect(effect && 'reason' in effect && effect.reason).toContain(named);
    expect(effect && 'reason' in effect && effect.reason).toMatch(/IdempotencyTransactionHost\.outside|separate queries/);
  });

  it.each([
    ['SET ROLE pg_write_all_data', true, false],
    ['set session role reporting', true, false],
    ['SET LOCAL ROLE reporting', true, false],
    ['SET SESSION AUTHORIZATION app_user', true, false],
    ['RESET ROLE', true, false],
    ['RESET ALL', true, false],
    ['RESET SESSION AUTHORIZATION', true, false],
    ['DEALLOCATE ALL', false, 'all'],
    ['DEALLOCATE PREPARE fetch_order', false, ['fetch_order']],
    ['DEALLOCATE "idempotency.Read"', false, ['idempotency.Read']],
    ['deallocate Fetch_Order; DEALLOCATE prepare "b"', false, ['fetch_order', 'b']],
    ['SET ROLE reporting; DEALLOCATE ALL', true, 'all'],
  ])('notes that %s changes what the module’s statements rely on', (sql, identity, preparedStatements) => {
    expect(effectOf(sql)).toEqual({ kind: 'session', identity, preparedStatements });
  });

  // Each hides a COMMIT from a reader that does not scan as PostgreSQL does (scan.l), and PostgreSQL runs it.
  it.each([
    ['-- x\rCOMMIT', 'a line comment ends at a carriage return'],
    ['/* a /* b */ x */ COMMIT', 'block comments nest'],
    ["SELECT E'\\''; COMMIT", "an E'…' string takes a backslash escape"],
    ['SELECT 1 AS a$$; COMMIT; SELECT 2 AS b$$', '$ goes on a name'],
    ['SELECT 1a$$ ; COMMIT; SELECT 2 b$$', 'a number ends where a name starts'],
    ["SELECT B'0'; COMMIT; SELECT ''", "a bit string ends at its first quote"],
    ["SELECT U&'\\'; COMMIT; SELECT ''", "a U&'…' string takes no backslash escape"],
    ["SELECT E''\n'\\'', '\\'; COMMIT", "an E'…' string continued on the next line takes backslash escapes there too"],
    ["SELECT E'' -- a comment\n  'x\\''; COMMIT; SELECT ''", 'a continuation may have comments after its line break'],
  ])('sees the COMMIT of %j (%s)', (sql) => {
    const effect = effectOf(sql);
    expect(effect?.kind === 'commit' || effect?.kind === 'refused', JSON.stringify(effect)).toBe(true);
  });

  it('reads a query config object as its text', () => {
    expect(effectOf({ text: 'COMMIT', values: [] })).toEqual({ kind: 'commit', chain: false, spelled: 'COMMIT' });
    expect(effectOf({ text: 'SELECT 1' })).toBeUndefined();
  });

  it('refuses a query that reads otherwise with standard_conforming_strings off, where one reading ends the transaction', () => {
    const effect = effectOf("SELECT 'a\\'; COMMIT; SELECT '");
    expect(effect?.kind).toBe('refused');
    expect(effect && 'reason' in effect && effect.reason).toContain('standard_conforming_strings');
    expect(effectOf("SELECT 'C:\\temp'")).toBeUndefined();
  });

  it('splits a query at its semicolons, not at those quoted, commented or dollar-quoted', () => {
    const sql = `INSERT INTO t VALUES ('a;b', "c;d"); -- x;y\nSELECT $1; SELECT $tag$ ; $tag$ /* ; /* ; */ ; */; ;`;
    expect(scanStatements(sql, false).map((statement) => statement.text.trim())).toEqual([`INSERT INTO t VALUES ('a;b', "c;d")`, '-- x;y\nSELECT $1', 'SELECT $tag$ ; $tag$ /* ; /* ; */ ; */']);
  });
});
