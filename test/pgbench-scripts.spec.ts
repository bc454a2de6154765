import { readFileSync } from 'node:fs';
import { OutboxStatements } from '../src/idempotency/outbox/outbox.store.js';
import { moduleTablesIn } from '../src/idempotency/records/module-tables.js';
import { IdempotencyStatements } from '../src/idempotency/records/record.statements.js';

/**
 * bench/pgbench's scripts copy the module's statements, pgbench variables in
 * place of parameters: when a statement changes, its script must follow, or
 * `npm run bench:pgbench` measures a design the module no longer has.
 */
const id = { scope: 's', operation: 'o', key: 'k' };
const event = { type: 't', payload: '{}', headers: '{}', orderingKey: 'o', sourceKeyHash: 'h' };
const outcome = { status: 201, headers: '{}', body: 'b' } as Parameters<IdempotencyStatements['recordAtCommit']>[4];
// The bench's database keeps the tables in public, as the migrations put them there.
const records = new IdempotencyStatements(moduleTablesIn('public'));
const outbox = new OutboxStatements(moduleTablesIn('public'));

const lock = records.tryLock(id).text;
const read = records.readRecord(id).text;
const readForClaim = records.readForClaim(id).text;
const record = records.recordAtCommit(id, 'f', 1, 1, outcome).text;
const insertRecord = records.insertRecord(id, 'f', 1, outcome).text;
const claim = records.claim(id, 'f', 1, 1).text;
const completeClaim = records.completeClaim(id, 'f', 1, outcome).text;
const bareEvent = outbox.insert(event, true).text;
const eventAtCommit = outbox.insertForOperation({ id, phase: '', recordAtCommit: true }, 0, event, true).text;
const eventOfRecord = outbox.insertForOperation({ id, phase: '', recordAtCommit: false }, 0, event, true).text;

/** What a statement does, whatever fills it: parameters, pgbench variables, string literals and NULL read `?`, whitespace one space. */
function shape(sql: string): string {
  return sql
    .replace(/E?'(?:[^']|'')*'/g, '?')
    .replace(/\$\d+|(?<![:\w]):\w+|\bNULL\b/g, '?')
    .replace(/\s+/g, ' ')
    .trim();
}

/** The script's statements' shapes, its comment lines left out. */
function script(name: string): string {
  return shape(readFileSync(new URL(`../bench/pgbench/${name}.sql`, import.meta.url), 'utf8').replace(/^--.*$/gm, ''));
}

describe('the pgbench scripts', () => {
  it.each([
    ['bare', [bareEvent], [lock, read, readForClaim, record, insertRecord, claim]],
    ['bare-pipelined', [bareEvent], [lock, read, readForClaim, record, insertRecord, claim]],
    ['guarded-first', [lock, readForClaim, eventAtCommit, insertRecord], [read, record, claim]],
    ['guarded-first-units', [lock, readForClaim, eventAtCommit, insertRecord], [read, record, claim]],
    ['claim-first-two-writes', [claim, eventOfRecord, completeClaim], [lock, read, readForClaim, record, insertRecord]],
  ])('%s sends the module statements it stands for, in order, and no others', (name, sent, absent) => {
    const text = script(name);
    const positions = sent.map((statement) => text.indexOf(shape(statement)));
    expect(positions).not.toContain(-1);
    expect(positions).toEqual([...positions].sort((a, b) => a - b));
    for (const statement of absent) expect(text).not.toContain(shape(statement));
  });
});
