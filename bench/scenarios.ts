import { randomBytes } from 'node:crypto';
import type { BenchAppOptions } from './bench-app.module.js';
import type { KeyPlan, LoadJob, LoadPhase, PhaseResult } from './load-protocol.js';

/** The scenario ids `--only` takes. */
export type ScenarioId =
  | 'floor'
  | 'bare'
  | 'intercepted'
  | 'first'
  | 'replay'
  | 'bursts'
  | 'peer-first'
  | 'peer-replay'
  | 'uncached-first'
  | 'uncached-replay'
  | 'claim-replay'
  | 'unpipelined-first'
  | 'claim-first-first'
  | 'encrypted-first'
  | 'encrypted-replay'
  | 'two-rows-bare'
  | 'two-rows-first'
  | 'two-rows-no-savepoints'
  // The paired run's harness profile only (`HARNESS_VARIANTS` in paired-schedule.ts): the outside harness's handler.
  | 'outbox-row-bare'
  | 'outbox-row-first'
  | 'outbox-row-peer-first'
  | 'outbox-row-replay'
  | 'outbox-row-uncached-replay'
  | 'outbox-row-peer-replay';

/**
 * The bench app processes, by what differs from the module's defaults: the
 * module options are global to an app, so each variant is a process of its
 * own, started only when one of its scenarios runs.
 */
export const APP_VARIANTS = {
  main: () => ({}),
  /** Every replay reads its record: the base of the encryption and read-first ratios. */
  uncached: () => ({ idempotency: { replayCacheSize: 0 } }),
  /** `uncached`, with no read before the claim: every replay goes through the claim. */
  'claim-first-replays': () => ({ idempotency: { replayCacheSize: 0, readFirst: false } }),
  /** node-postgres pipelining off: BEGIN, the claim, the outcome and COMMIT each wait for the previous answer. */
  unpipelined: () => ({ pipeline: false }),
  /** Units of the handler's writes without savepoints (`unitSavepoints: false`): what they cost. */
  'no-savepoints': () => ({ idempotency: { unitSavepoints: false } }),
  // A fresh key per run: the bench database is dropped at the end, and nothing sealed outlives it.
  encrypted: () => ({ idempotency: { replayCacheSize: 0, encryption: { keys: [{ id: 'bench', key: randomBytes(32).toString('base64') }] } } }),
} satisfies Record<string, () => Omit<BenchAppOptions, 'databaseUrl' | 'peer'>>;

export type BenchAppVariant = keyof typeof APP_VARIANTS;

/** One kind of load against one bench route. */
export interface Scenario {
  id: ScenarioId;
  label: string;
  path: string;
  keys: KeyPlan['mode'];
  /** Runs only when the peer's route exists (a Redis server answered). */
  peer: boolean;
  app: BenchAppVariant;
  /** Statuses a healthy run answers with. */
  statuses: readonly number[];
  /** Whether 2xx answers must all be replays, must all be first executions, or may be either. */
  replays: 'all' | 'none' | 'any';
}

const IDEMPOTENT = '/bench/orders/idempotent';
/** A first execution (fresh keys) or a replay (a pool of completed keys, cycled) of ours on an app variant. */
const ours = (id: ScenarioId, label: string, app: BenchAppVariant, replay: boolean, path = IDEMPOTENT): Scenario => ({
  id,
  label,
  path,
  keys: replay ? 'cycle' : 'fresh',
  peer: false,
  app,
  statuses: [201],
  replays: replay ? 'all' : 'none',
});

/** In the order they run in each round; every scenario sends the same body and an Idempotency-Key. */
export const SCENARIOS: readonly Scenario[] = [
  { id: 'floor', label: 'framework floor', path: '/bench/floor', keys: 'fresh', peer: false, app: 'main', statuses: [201], replays: 'none' },
  { id: 'bare', label: 'bare transaction', path: '/bench/orders/bare', keys: 'fresh', peer: false, app: 'main', statuses: [201], replays: 'none' },
  { id: 'intercepted', label: 'bare, pass-through interceptor', path: '/bench/orders/intercepted', keys: 'fresh', peer: false, app: 'main', statuses: [201], replays: 'none' },
  ours('first', 'first execution', 'main', false),
  ours('replay', 'replay', 'main', true),
  { id: 'bursts', label: 'duplicate bursts', path: IDEMPOTENT, keys: 'burst', peer: false, app: 'main', statuses: [201, 409], replays: 'any' },
  { id: 'peer-first', label: 'peer first execution', path: '/bench/peer/orders', keys: 'fresh', peer: true, app: 'main', statuses: [201], replays: 'none' },
  { id: 'peer-replay', label: 'peer replay', path: '/bench/peer/orders', keys: 'cycle', peer: true, app: 'main', statuses: [201], replays: 'all' },
  ours('uncached-first', 'first, cache off', 'uncached', false),
  ours('uncached-replay', 'replay, cache off', 'uncached', true),
  ours('claim-replay', 'replay, no read-first', 'claim-first-replays', true, '/bench/orders/claim-first'),
  ours('unpipelined-first', 'first, no pipelining', 'unpipelined', false),
  // The default's work on a route of its own: against `first`, the same work twice.
  ours('claim-first-first', 'first, second route', 'main', false, '/bench/orders/claim-first'),
  ours('encrypted-first', 'encrypted first', 'encrypted', false),
  ours('encrypted-replay', 'encrypted replay', 'encrypted', true),
  // The shape most handlers have: two inserts through IdempotencyTransactionHost.manager, no module API between them.
  { id: 'two-rows-bare', label: 'two rows, bare transaction', path: '/bench/two-rows/bare', keys: 'fresh', peer: false, app: 'main', statuses: [201], replays: 'none' },
  ours('two-rows-first', 'two rows, first execution', 'main', false, '/bench/two-rows/idempotent'),
  ours('two-rows-no-savepoints', 'two rows, no unit savepoints', 'no-savepoints', false, '/bench/two-rows/idempotent'),
];

/** A scenario against its twin, which differs in one thing only: the ratio is that thing's cost. */
export interface Twins {
  /** What differs, e.g. `encryption, first execution`. */
  name: string;
  subject: ScenarioId;
  base: ScenarioId;
}

/** The twin comparisons printed and written where both scenarios ran. */
export const TWINS: readonly Twins[] = [
  { name: 'a pass-through interceptor (Nest’s share), bare transaction', subject: 'intercepted', base: 'bare' },
  { name: 'the idempotency layer above that interceptor', subject: 'first', base: 'intercepted' },
  { name: 'encryption, first execution', subject: 'encrypted-first', base: 'uncached-first' },
  { name: 'encryption, replay (reads and decrypts)', subject: 'encrypted-replay', base: 'uncached-replay' },
  { name: 'no read-first, replay from the table', subject: 'claim-replay', base: 'uncached-replay' },
  { name: 'no pipelining, first execution', subject: 'unpipelined-first', base: 'first' },
  { name: 'two rows through IdempotencyTransactionHost.manager: the module’s default ÷ bare', subject: 'two-rows-first', base: 'two-rows-bare' },
  { name: 'no unit savepoints, two rows', subject: 'two-rows-no-savepoints', base: 'two-rows-first' },
];

/** The demo's order body: valid for CreateOrderDto, identical on every request so replays match their fingerprint. */
export const ORDER_BODY = JSON.stringify({ sku: 'bench-sku-1', quantity: 2 });

/**
 * The load of one scenario in one round: on the first round, a replay
 * scenario first completes its pool of keys once; then a warm-up and the
 * measurement. Key prefixes carry the run id, scenario, round and phase, so
 * no two requests meant to be fresh ever share a key.
 */
export function loadJobFor(
  scenario: Pick<Scenario, 'path' | 'keys'> & { id: string },
  round: number,
  options: { connections: number; replayKeys: number; warmupSeconds: number; durationSeconds: number; burstSize?: number },
  runId: string,
  appUrl: string,
): LoadJob {
  const connections = options.connections;
  const plan = (phase: string): KeyPlan => {
    const prefix = `${runId}.${scenario.id}.r${round}.${phase}`;
    if (scenario.keys === 'cycle') return { mode: 'cycle', prefix: `${runId}.${scenario.id}.pool`, poolSize: options.replayKeys };
    if (scenario.keys === 'burst') {
      if (!options.burstSize) throw new Error(`scenario ${scenario.id}: bursts need a burst size`);
      return { mode: 'burst', prefix, burstSize: options.burstSize };
    }
    if (scenario.keys === 'random') return { mode: 'random' };
    return { mode: 'fresh', prefix };
  };
  const phases: LoadPhase[] = [];
  if (scenario.keys === 'cycle' && round === 1) {
    phases.push({ name: 'prepare', connections: Math.min(connections, options.replayKeys), amount: options.replayKeys, keys: plan('prepare') });
  }
  if (options.warmupSeconds > 0) phases.push({ name: 'warm-up', connections, durationSeconds: options.warmupSeconds, keys: plan('warm') });
  phases.push({ name: 'measure', connections, durationSeconds: options.durationSeconds, keys: plan('measure') });
  return { url: appUrl + scenario.path, body: ORDER_BODY, phases };
}

/** What went wrong in one scenario run, if anything: connection errors, no answers, unexpected statuses or replays. */
export function problemsOf(scenario: Pick<Scenario, 'statuses' | 'replays'>, phases: readonly PhaseResult[]): string[] {
  const problems: string[] = [];
  for (const phase of phases) {
    const where = `${phase.name}:`;
    if (phase.errors > 0) problems.push(`${where} ${phase.errors} connection errors (${phase.timeouts} timeouts)`);
    if (phase.responses === 0) problems.push(`${where} no responses`);
    const unexpected = Object.entries(phase.statusCounts).filter(([status]) => !scenario.statuses.includes(Number(status)));
    if (unexpected.length) problems.push(`${where} unexpected statuses ${unexpected.map(([status, count]) => `${status}×${count}`).join(', ')}`);
    // The prepare phase is what completes the replay pool: its answers are first executions.
    const replays = phase.name === 'prepare' ? 'none' : scenario.replays;
    if (replays === 'none' && phase.replayed2xx > 0) problems.push(`${where} ${phase.replayed2xx} answers were replays, expected first executions`);
    if (replays === 'all' && phase.fresh2xx > 0) problems.push(`${where} ${phase.fresh2xx} answers were first executions, expected replays`);
  }
  return problems;
}
