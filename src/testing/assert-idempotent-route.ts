import { randomUUID } from 'node:crypto';
import { REPLAYED_HEADER } from '../idempotency/outcome/recorded-outcome.js';
import { type Answer, describe, isReplay, type ListeningApp, RouteProbe } from './route-probe.js';

/** What to check, and how to reach and observe the route. */
export interface IdempotentRouteCheck {
  /** The app: a Nest application after `await app.listen(0)`, or a base URL such as `http://127.0.0.1:3000`. */
  app: ListeningApp | string | URL;
  /** Default `POST`. */
  method?: string;
  /** The path with its parameters filled in, e.g. `/orders/42/payments`. */
  path: string;
  /** The request body: sent as JSON, or as is when a string. */
  body?: unknown;
  /**
   * A body that changes a fingerprinted field, sent with a used key to check
   * the 422. Default: `body` with one field added (an object of one field when
   * `body` is not an object). Pass one when the route fingerprints only some
   * fields, or its body is not a JSON object.
   */
  differentBody?: unknown;
  /** Headers for every request: authentication, tenant. */
  headers?: Record<string, string>;
  /** Counts the route's effects, e.g. `SELECT count(*) FROM orders`. */
  countEffects(): number | Promise<number>;
  /** How much one execution adds to `countEffects()`. Default 1. */
  effectsPerExecution?: number;
  /** Whether the route requires a key, so that a request without one gets 400. Default true. */
  keyRequired?: boolean;
  /** Requests sent at once with one fresh key. Default 10; 0 skips the check. */
  burst?: number;
  /** The key header. Default `Idempotency-Key`. */
  headerName?: string;
}

/** The checks `assertIdempotentRoute()` runs, in order. */
export type IdempotencyCheckName = 'first-execution' | 'replay' | 'key-reuse' | 'missing-key' | 'concurrent-burst';

/** How one check of `assertIdempotentRoute()` ended. */
export interface IdempotencyCheckResult {
  name: IdempotencyCheckName;
  result: 'passed' | 'skipped';
  /** What was sent and seen, e.g. `201, replayed byte for byte`. */
  detail: string;
}

/** What `assertIdempotentRoute` checked: it only returns when every check passed. */
export interface IdempotentRouteReport {
  /** `POST /orders` */
  route: string;
  checks: IdempotencyCheckResult[];
  /** Fresh keys that executed, and what they added to `countEffects()` in all. */
  executions: number;
  effectsAdded: number;
  /** How the concurrent burst was answered: one execution, the rest replays or 409s. */
  burst: { size: number; replayed: number; conflicts: number };
}

/**
 * Proves that a route is idempotent, against the running app over HTTP: a
 * first request with a fresh key, its retry (same status, same body bytes,
 * `Idempotent-Replayed: true`), the key with a different body (422), a
 * request without a key (400) and a burst of concurrent requests with one
 * fresh key, checking after each that the effects grew by exactly one
 * execution per fresh key. Throws an `AssertionError` that names the failed
 * check, so it works under any test runner.
 *
 * @example
 * const report = await assertIdempotentRoute({
 *   app, path: '/orders', body: { sku: 'book-42', quantity: 2 },
 *   headers: { authorization: 'Bearer test-key' },
 *   countEffects: async () => (await dataSource.query('SELECT count(*)::int AS n FROM orders'))[0].n,
 * });
 */
export async function assertIdempotentRoute(check: IdempotentRouteCheck): Promise<IdempotentRouteReport> {
  const headerName = check.headerName ?? 'Idempotency-Key';
  const probe = await RouteProbe.of(check.app, check.method ?? 'POST', check.path, check.headers ?? {}, headerName);
  const perExecution = check.effectsPerExecution ?? 1;
  const effectsAtStart = await check.countEffects();
  let effects = effectsAtStart;
  /** Counts effects again and checks what `sent` added. */
  const expectEffects = async (executions: number, sent: string, hint: string) => {
    const now = await check.countEffects();
    const added = now - effects;
    const expected = executions * perExecution;
    probe.check(added === expected, `${sent} added ${effectCount(added)} (${effects} → ${now}); expected ${expected}. ${hint}`, added, expected);
    effects = now;
  };
  const checks: IdempotencyCheckResult[] = [];

  const key = newKey();
  const first = await probe.send(check.body, key);
  probe.check(first.status >= 200 && first.status < 300, `the first request with a fresh key answered ${describe(first)}; expected a 2xx. Check the body and headers the route needs.`, first.status, '2xx');
  probe.check(!isReplay(first), `the first request with a fresh key came back with ${REPLAYED_HEADER}: true; expected a first execution.`);
  await expectEffects(1, 'the first request with a fresh key', 'Does countEffects() count what the route writes, and effectsPerExecution say how much one execution adds?');
  checks.push({ name: 'first-execution', result: 'passed', detail: `${first.status}, ${effectCount(perExecution)}` });

  const retry = await probe.send(check.body, key);
  await expectEffects(0, `a retry with the same ${headerName}`, `The route is not idempotent: the handler ran again. Is @Idempotent() on it, and is its key header ${headerName}?`);
  probe.check(retry.status === first.status, `a retry with the same ${headerName} answered ${describe(retry)}; the first request answered ${describe(first)}.`, retry.status, first.status);
  probe.check(isReplay(retry), `a retry with the same ${headerName} answered without ${REPLAYED_HEADER}: true; expected a replay.`, retry.headers.get(REPLAYED_HEADER), 'true');
  probe.check(retry.body.equals(first.body), `a retry's body differs from the first answer's: expected the same bytes.`, retry.body.toString('utf8'), first.body.toString('utf8'));
  checks.push({ name: 'replay', result: 'passed', detail: `${retry.status}, ${retry.body.length} bytes replayed byte for byte, ${REPLAYED_HEADER}: true` });

  const other = await probe.send(check.differentBody ?? differentFrom(check.body), key);
  await expectEffects(0, `the used ${headerName} with a different body`, 'A key reused for another request must never run it.');
  probe.check(other.status === 422, `the used ${headerName} with a different body answered ${describe(other)}; expected 422 (key reused). If the route fingerprints only some fields, pass a differentBody that changes one of them.`, other.status, 422);
  checks.push({ name: 'key-reuse', result: 'passed', detail: '422' });

  if (check.keyRequired ?? true) {
    const keyless = await probe.send(check.body, undefined);
    await expectEffects(0, `a request without ${headerName}`, 'A route that requires a key must refuse requests without one.');
    probe.check(keyless.status === 400, `a request without ${headerName} answered ${describe(keyless)}; expected 400. If the route takes requests without a key (@Idempotent({ required: false })), pass keyRequired: false.`, keyless.status, 400);
    checks.push({ name: 'missing-key', result: 'passed', detail: '400' });
  } else {
    checks.push({ name: 'missing-key', result: 'skipped', detail: 'keyRequired: false' });
  }

  const size = check.burst ?? 10;
  let burst = { size, replayed: 0, conflicts: 0 };
  if (size > 0) {
    const burstKey = newKey();
    const answers = await Promise.all(Array.from({ length: size }, () => probe.send(check.body, burstKey)));
    burst = checkBurst(probe, answers, first.status, headerName);
    await expectEffects(1, `${size} concurrent requests with one fresh ${headerName}`, 'Concurrent duplicates must wait for the first and replay it (or get 409), never run.');
    checks.push({ name: 'concurrent-burst', result: 'passed', detail: `${size} at once: 1 executed, ${burst.replayed} replayed, ${burst.conflicts} got 409` });
  } else {
    checks.push({ name: 'concurrent-burst', result: 'skipped', detail: 'burst: 0' });
  }

  const executions = size > 0 ? 2 : 1;
  return { route: probe.label, checks, executions, effectsAdded: effects - effectsAtStart, burst };
}

/** One answer without the replay header, the others replays of the same bytes, or 409s. */
function checkBurst(probe: RouteProbe, answers: Answer[], successStatus: number, headerName: string): { size: number; replayed: number; conflicts: number } {
  const sent = `of ${answers.length} concurrent requests with one fresh ${headerName}`;
  const unexpected = answers.find((answer) => answer.status !== successStatus && answer.status !== 409);
  probe.check(!unexpected, `${sent}, one answered ${unexpected && describe(unexpected)}; expected ${successStatus}, or 409 for one still waiting.`);
  const successes = answers.filter((answer) => answer.status === successStatus);
  const executed = successes.filter((answer) => !isReplay(answer));
  probe.check(executed.length === 1, `${sent}, ${executed.length} answered as first executions (without ${REPLAYED_HEADER}: true); expected exactly 1.`, executed.length, 1);
  const differing = successes.find((answer) => !answer.body.equals(executed[0].body));
  probe.check(!differing, `${sent}, a replay's body differs from the execution's.`, differing?.body.toString('utf8'), executed[0].body.toString('utf8'));
  return { size: answers.length, replayed: successes.length - 1, conflicts: answers.length - successes.length };
}

function effectCount(count: number): string {
  return `${count} effect${count === 1 ? '' : 's'}`;
}

function newKey(): string {
  return `idempotency-check-${randomUUID()}`;
}

/** The body with one field added; an object of one field in place of any other body. */
function differentFrom(body: unknown): unknown {
  const fields = body !== null && typeof body === 'object' && !Array.isArray(body) ? body : {};
  return { ...fields, idempotencyCheck: randomUUID() };
}
