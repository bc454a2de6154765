import { HttpException } from '@nestjs/common';
import fc from 'fast-check';
import request from 'supertest';
import type { Ledger } from './ledger-app.js';
import type { TestDatabase } from './test-database.js';

/**
 * A reference model of the HTTP contract of `POST /entries` (storeErrors [402])
 * in the ledger app, and fast-check commands that drive the real app and
 * compare every answer with what the model predicts.
 */
export const TENANTS = ['acme', 'globex'] as const;
export type Tenant = (typeof TENANTS)[number];
export type BodyName = 'a' | 'b';

/** Where a request goes and what it carries: tenant, key (an index into the pool), body, key form, body spelling. */
interface Attempt { tenant: Tenant; key: number; body: BodyName; quoted: boolean; spelling: number }
/** The outcome a (tenant, key) recorded, and the body it was recorded for. */
export interface Entry extends Omit<Attempt, 'quoted' | 'spelling'> { status: number; text: string; contentType: string | undefined }
export interface FlowModel {
  entries: Map<string, Entry>;
  /**
   * Handler calls the contract requires so far: fresh outcomes and failed
   * attempts, exactly the calls made.
   */
  executions: number;
}
/** The app, plus a namespace for keys and labels so runs sharing it never meet. */
export interface FlowReal { url: string; ledger: Ledger; db: TestDatabase; ns: string }
type Scripted = 'none' | 'error' | 'throttled' | 'declined';
type Cmd = fc.AsyncCommand<FlowModel, FlowReal>;

const PROBLEM = 'urn:nest-idempotency:problem:';
const slot = (tenant: Tenant, key: number) => `${tenant}/${key}`;
/** Few keys so they collide; the last needs escapes in its quoted form. */
export const keyOf = (ns: string, key: number) => [`${ns}-a`, `${ns}-b`, `${ns}-q"\\`][key];
const quote = (key: string) => `"${key.replace(/[\\"]/g, '\\$&')}"`;
const other = (body: BodyName): BodyName => (body === 'a' ? 'b' : 'a');
export const labelOf = (ns: string, body: BodyName) => `${ns}:${body}`;
/** Two spellings of one body: key order, spacing and number form must not change the fingerprint. */
const bodyText = (ns: string, body: BodyName, spelling: number) =>
  spelling === 0 ? `{"label":"${labelOf(ns, body)}","n":1}` : `{ "n": 1.0, "label": "${labelOf(ns, body)}" }`;
const describeAttempt = (a: Attempt) => `${a.tenant}/${a.key} ${a.body}${a.quoted ? ' quoted' : ''}${a.spelling ? ' respelled' : ''}`;

const failures: Record<Exclude<Scripted, 'none'>, { status: number; make: () => Error }> = {
  error: { status: 500, make: () => new Error('scripted failure') },
  throttled: { status: 429, make: () => new HttpException('try later', 429) },
  declined: { status: 402, make: () => new HttpException({ code: 'declined' }, 402) },
};

/** Sends now (supertest sends only once awaited); `header` overrides the key header. */
function send(real: FlowReal, a: Pick<Attempt, 'tenant'> & Partial<Attempt>, header?: string | string[]): Promise<request.Response> {
  const req = request(real.url).post('/entries').set('Content-Type', 'application/json').set('X-Tenant', a.tenant);
  const key = a.key === undefined ? header : a.quoted ? quote(keyOf(real.ns, a.key)) : keyOf(real.ns, a.key);
  // An array becomes one header line per value, which is how a repeated header is sent.
  if (key !== undefined) req.set('Idempotency-Key', key as string);
  return Promise.resolve(req.send(bodyText(real.ns, a.body ?? 'a', a.spelling ?? 0)));
}

export async function recordsAt(real: FlowReal, tenant: Tenant, key: number): Promise<number> {
  const rows = await real.db.query<{ n: string }>(`SELECT count(*) AS n FROM idempotency_records WHERE scope = $1 AND key = $2`, [`tenant:${tenant}`, keyOf(real.ns, key)]);
  return Number(rows[0].n);
}

function expectReplay(res: request.Response, entry: Entry): void {
  const { status, text, contentType } = entry;
  expect({ status: res.status, text: res.text, contentType: res.headers['content-type'], replayed: res.headers['idempotent-replayed'] }).toEqual({ status, text, contentType, replayed: 'true' });
}

function expectProblem(res: request.Response, status: number, type: string): void {
  expect({ status: res.status, type: res.body?.type, replayed: res.headers['idempotent-replayed'] }).toEqual({ status, type: PROBLEM + type, replayed: undefined });
  expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
}

function expectBusy(res: request.Response): void {
  expectProblem(res, 409, 'request-in-progress');
  expect(res.headers['retry-after']).toMatch(/^[1-9][0-9]*$/);
}

/** What a request answers on a key the model already holds: a replay for the same body, else 422. */
function expectAgainst(res: request.Response, entry: Entry, body: BodyName): void {
  if (entry.body === body) expectReplay(res, entry);
  else expectProblem(res, 422, 'key-reused');
}

function record(m: FlowModel, a: Attempt, res: request.Response): void {
  const { tenant, key, body } = a;
  m.entries.set(slot(tenant, key), { tenant, key, body, status: res.status, text: res.text, contentType: res.headers['content-type'] });
}

/** One sequential request, with the handler scripted to fail (or not) should it run. */
async function attempt(m: FlowModel, r: FlowReal, a: Attempt, scripted: Scripted): Promise<void> {
  const entry = m.entries.get(slot(a.tenant, a.key));
  if (scripted !== 'none') r.ledger.script.push({ fail: failures[scripted].make() });
  try {
    const res = await send(r, a);
    if (entry) return expectAgainst(res, entry, a.body);
    m.executions++;
    expect({ status: res.status, replayed: res.headers['idempotent-replayed'] }).toEqual({ status: scripted === 'none' ? 201 : failures[scripted].status, replayed: undefined });
    if (scripted === 'none') expect(JSON.parse(res.text)).toEqual({ entry: expect.any(Number), label: labelOf(r.ns, a.body) });
    if (scripted === 'none' || scripted === 'declined') record(m, a, res);
    else expect(await recordsAt(r, a.tenant, a.key)).toBe(0);
  } finally {
    r.ledger.script.length = 0;
  }
}

class SendCommand implements Cmd {
  constructor(readonly a: Attempt, readonly scripted: Scripted) {}
  check = () => true;
  run = (m: FlowModel, r: FlowReal) => attempt(m, r, this.a, this.scripted);
  toString = () => `send(${describeAttempt(this.a)}${this.scripted === 'none' ? '' : `, ${this.scripted}`})`;
}

/** Picks a recorded entry at run time, so retries and mismatches always land on a used key. */
class ReuseCommand implements Cmd {
  constructor(readonly pick: number, readonly sameBody: boolean, readonly quoted: boolean, readonly spelling: number) {}
  check = (m: Readonly<FlowModel>) => m.entries.size > 0;
  run(m: FlowModel, r: FlowReal) {
    const entry = [...m.entries.values()][this.pick % m.entries.size];
    const body = this.sameBody ? entry.body : other(entry.body);
    return attempt(m, r, { tenant: entry.tenant, key: entry.key, body, quoted: this.quoted, spelling: this.spelling }, 'none');
  }
  toString = () => `${this.sameBody ? 'retry' : 'mismatch'}(#${this.pick}${this.quoted ? ' quoted' : ''}${this.spelling ? ' respelled' : ''})`;
}

/**
 * N requests at once, bare and quoted keys mixed, the last one with the other
 * body when `mixed`; the owner is slowed so that they overlap.
 */
class ConcurrentCommand implements Cmd {
  constructor(readonly a: Attempt, readonly n: number, readonly delayMs: number, readonly ownerFails: boolean, readonly mixed: boolean) {}
  check = () => true;
  async run(m: FlowModel, r: FlowReal) {
    const entry = m.entries.get(slot(this.a.tenant, this.a.key));
    const bodies = Array.from({ length: this.n }, (_, i) => (this.mixed && i === this.n - 1 ? other(this.a.body) : this.a.body));
    r.ledger.script.push({ delayMs: this.delayMs, fail: this.ownerFails ? new Error('owner failed') : undefined });
    try {
      const all = await Promise.all(bodies.map((body, i) => send(r, { ...this.a, body, quoted: i % 2 === 1 })));
      if (entry) return all.forEach((res, i) => expectAgainst(res, entry, bodies[i]));
      const fresh = all.flatMap((res, i) => (res.status === 201 && res.headers['idempotent-replayed'] === undefined ? [i] : []));
      const failed = all.filter((res) => res.status === 500);
      // Exactly one owner runs; a failed owner frees the key for one waiting duplicate.
      expect(failed.length).toBe(this.ownerFails ? 1 : 0);
      expect(fresh.length).toBeLessThanOrEqual(1);
      if (!this.ownerFails) expect(fresh.length).toBe(1);
      m.executions += failed.length + fresh.length;
      if (fresh.length) record(m, { ...this.a, body: bodies[fresh[0]] }, all[fresh[0]]);
      const recorded = m.entries.get(slot(this.a.tenant, this.a.key));
      all.forEach((res, i) => {
        if (fresh.includes(i) || res.status === 500) return;
        // A duplicate that outwaits `wait` gets 409; with nothing recorded, that is all it can get.
        if (res.status === 409 || !recorded) expectBusy(res);
        else expectAgainst(res, recorded, bodies[i]);
      });
      if (!recorded) expect(await recordsAt(r, this.a.tenant, this.a.key)).toBe(0);
    } finally {
      r.ledger.script.length = 0;
    }
  }
  toString = () => `concurrent(${describeAttempt(this.a)} x${this.n}, ${this.delayMs}ms${this.ownerFails ? ', owner fails' : ''}${this.mixed ? ', mixed' : ''})`;
}

const BAD_KEYS = ['missing', 'empty', 'long', 'space', 'tab', 'latin1', 'unterminated', 'bad-escape', 'repeated'] as const;
type BadKey = (typeof BAD_KEYS)[number];
const badHeader = (ns: string, kind: BadKey): string | string[] | undefined =>
  ({
    missing: undefined,
    empty: '',
    long: `${ns}-${'x'.repeat(255)}`,
    space: `${ns} a`,
    tab: `${ns}\ta`,
    latin1: `${ns}\u00e9`,
    unterminated: `"${ns}-a`,
    'bad-escape': `"${ns}\\a"`,
    repeated: [`${ns}-a`, `${ns}-a`],
  })[kind];

/** No usable key: 400, the handler never runs, nothing changes in the model. */
class BadKeyCommand implements Cmd {
  constructor(readonly tenant: Tenant, readonly kind: BadKey) {}
  check = () => true;
  async run(_m: FlowModel, r: FlowReal) {
    const calls = r.ledger.calls;
    const res = await send(r, { tenant: this.tenant }, badHeader(r.ns, this.kind));
    expectProblem(res, 400, this.kind === 'missing' ? 'key-missing' : 'key-malformed');
    expect(r.ledger.calls).toBe(calls);
  }
  toString = () => `badKey(${this.tenant}, ${this.kind})`;
}

const tenant = fc.constantFrom(...TENANTS);
const target = fc.record({ tenant, key: fc.nat({ max: 2 }), body: fc.constantFrom<BodyName>('a', 'b'), quoted: fc.boolean(), spelling: fc.nat({ max: 1 }) });

export const flowCommands: fc.Arbitrary<Cmd>[] = [
  target.map((a) => new SendCommand(a, 'none')),
  fc.tuple(target, fc.constantFrom<Scripted>('error', 'throttled')).map(([a, s]) => new SendCommand(a, s)),
  target.map((a) => new SendCommand(a, 'declined')),
  fc.tuple(fc.nat(), fc.boolean(), fc.nat({ max: 1 })).map(([pick, quoted, spelling]) => new ReuseCommand(pick, true, quoted, spelling)),
  fc.nat().map((pick) => new ReuseCommand(pick, false, false, 0)),
  fc.tuple(target, fc.integer({ min: 2, max: 4 }), fc.integer({ min: 20, max: 120 }), fc.boolean(), fc.boolean()).map(
    ([a, n, delay, fails, mixed]) => new ConcurrentCommand(a, n, delay, fails, mixed),
  ),
  fc.tuple(tenant, fc.constantFrom(...BAD_KEYS)).map(([t, kind]) => new BadKeyCommand(t, kind)),
];
