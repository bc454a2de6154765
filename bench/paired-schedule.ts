import type { BenchAppOptions } from './bench-app.module.js';
import type { LoadTarget } from './load-protocol.js';
import { APP_VARIANTS, SCENARIOS, type Scenario, type ScenarioId, type Twins } from './scenarios.js';

/**
 * The path prefix of the app mounted beside the main one in a paired run's
 * bench app, and its module options: the replay cache is global to an app.
 */
export const CACHE_OFF_MOUNT = { prefix: 'cache-off', idempotency: { replayCacheSize: 0 } } as const;

/** Another app mounted beside the main one: the units' savepoints off (the round-based method's `no-savepoints` app). */
export const NO_SAVEPOINTS_MOUNT = { prefix: 'no-savepoints', idempotency: APP_VARIANTS['no-savepoints']().idempotency } as const;

/** The scenario of `id`, as a paired run sends it: every one to the one bench app process. */
function variant(id: ScenarioId, path?: string): Scenario {
  const scenario = SCENARIOS.find((candidate) => candidate.id === id);
  if (!scenario) throw new Error(`no scenario ${id}`);
  return { ...scenario, app: 'main', ...(path && { path }) };
}

/** What a paired run measures; the scenarios of the same ids in `SCENARIOS`, on one app. */
export const PAIRED_VARIANTS: readonly Scenario[] = [
  variant('floor'),
  variant('bare'),
  variant('intercepted'),
  variant('first'),
  variant('claim-first-first'),
  variant('peer-first'),
  variant('two-rows-bare'),
  variant('two-rows-first'),
  variant('two-rows-no-savepoints', `/${NO_SAVEPOINTS_MOUNT.prefix}${SCENARIOS.find((scenario) => scenario.id === 'two-rows-no-savepoints')!.path}`),
  variant('replay'),
  variant('peer-replay'),
  variant('uncached-replay', `/${CACHE_OFF_MOUNT.prefix}${SCENARIOS.find((scenario) => scenario.id === 'uncached-replay')!.path}`),
];

/** The comparisons a paired run reports: each a subject and the base it is divided by. */
export const COMPARISONS: readonly Twins[] = [
  { name: 'bare transaction ÷ framework floor', subject: 'bare', base: 'floor' },
  { name: 'pass-through interceptor ÷ bare (Nest’s share)', subject: 'intercepted', base: 'bare' },
  { name: 'module’s default ÷ bare', subject: 'first', base: 'bare' },
  { name: 'module’s default ÷ pass-through interceptor', subject: 'first', base: 'intercepted' },
  { name: 'peer ÷ bare', subject: 'peer-first', base: 'bare' },
  { name: 'module’s default ÷ peer', subject: 'first', base: 'peer-first' },
  // The same work twice, on two routes: this pair shows the method's own noise.
  { name: 'second route ÷ module’s default (same work)', subject: 'claim-first-first', base: 'first' },
  { name: 'two rows: module’s default ÷ bare', subject: 'two-rows-first', base: 'two-rows-bare' },
  { name: 'two rows: no unit savepoints ÷ module’s default', subject: 'two-rows-no-savepoints', base: 'two-rows-first' },
  { name: 'replay ÷ peer replay', subject: 'replay', base: 'peer-replay' },
  { name: 'replay, cache off ÷ peer replay', subject: 'uncached-replay', base: 'peer-replay' },
  { name: 'replay, cache off ÷ replay, cache on', subject: 'uncached-replay', base: 'replay' },
];

/**
 * One cycle of the schedule: a walk in which the two variants of every
 * comparison follow each other once, so each window is compared with both
 * its neighbours. Without the peer, its windows drop out and their
 * neighbours meet: default and bare, cache off and cache on.
 */
const CYCLE: readonly ScenarioId[] = [
  'floor',
  'bare',
  'intercepted',
  'first',
  'bare',
  'peer-first',
  'first',
  'claim-first-first',
  'two-rows-no-savepoints',
  'two-rows-first',
  'two-rows-bare',
  'replay',
  'peer-replay',
  'uncached-replay',
  'replay',
];

/**
 * The variants of a run's windows, in order: `cycles` cycles, every other
 * one reversed, so that each comparison's variants take turns going first;
 * where a reversal meets the cycle's end, that variant runs once.
 */
export function windowSchedule(cycles: number, variants: readonly Scenario[], cycle: readonly ScenarioId[] = CYCLE): Scenario[] {
  const byId = new Map(variants.map((scenario) => [scenario.id, scenario]));
  const walk = cycle.filter((id) => byId.has(id));
  const windows: Scenario[] = [];
  for (let cycle = 0; cycle < cycles; cycle++) {
    for (const id of cycle % 2 === 0 ? walk : [...walk].reverse()) {
      if (windows[windows.length - 1]?.id !== id) windows.push(byId.get(id)!);
    }
  }
  return windows;
}

/** The comparison two neighbouring windows make, in either order, if any. */
export function comparisonOf(one: ScenarioId, other: ScenarioId, comparisons: readonly Twins[] = COMPARISONS): Twins | undefined {
  return comparisons.find((comparison) => (comparison.subject === one && comparison.base === other) || (comparison.subject === other && comparison.base === one));
}

/**
 * Where a stretch of load goes: `stretch` names it (`w17` for the 17th
 * window), and fresh keys carry it with the run id, so no two stretches
 * share one; replays cycle through the pool their variant completed before
 * the first window.
 */
export function targetOf(variant: Scenario, runId: string, stretch: string, replayKeys: number): LoadTarget {
  if (variant.keys === 'cycle') return { path: variant.path, keys: { mode: 'cycle', prefix: `${runId}.${variant.id}.pool`, poolSize: replayKeys } };
  return { path: variant.path, keys: { mode: 'fresh', prefix: `${runId}.${variant.id}.${stretch}` } };
}

/** The outside harness's handler (`outbox-row-order.ts`): an order and an outbox row, two `insert()`s through `IdempotencyTransactionHost.manager`. */
const OUTBOX_ROW = { bare: '/bench/outbox-row/bare', idempotent: '/bench/outbox-row/idempotent', peer: '/bench/peer/outbox-row' } as const;

/** A variant on the outbox-row routes: fresh keys (first executions) or a pool of completed keys, cycled (replays). */
const outboxRow = (id: ScenarioId, label: string, path: string, replay: boolean, peer = false): Scenario => ({
  id,
  label,
  path,
  keys: replay ? 'cycle' : 'fresh',
  peer,
  app: 'main',
  statuses: [201],
  replays: replay ? 'all' : 'none',
});

/** What the harness profile measures: the outside harness's handler bare, behind `@Idempotent()` and behind the peer, and their replays. */
export const HARNESS_VARIANTS: readonly Scenario[] = [
  outboxRow('outbox-row-bare', 'outbox row, bare transaction', OUTBOX_ROW.bare, false),
  outboxRow('outbox-row-first', 'outbox row, first execution', OUTBOX_ROW.idempotent, false),
  outboxRow('outbox-row-peer-first', 'outbox row, peer first', OUTBOX_ROW.peer, false, true),
  outboxRow('outbox-row-replay', 'outbox row, replay', OUTBOX_ROW.idempotent, true),
  outboxRow('outbox-row-uncached-replay', 'outbox row, replay, cache off', `/${CACHE_OFF_MOUNT.prefix}${OUTBOX_ROW.idempotent}`, true),
  outboxRow('outbox-row-peer-replay', 'outbox row, peer replay', OUTBOX_ROW.peer, true, true),
];

/** The harness profile's comparisons. */
export const HARNESS_COMPARISONS: readonly Twins[] = [
  { name: 'outbox row: module’s default ÷ bare', subject: 'outbox-row-first', base: 'outbox-row-bare' },
  { name: 'outbox row: module’s default ÷ peer', subject: 'outbox-row-first', base: 'outbox-row-peer-first' },
  { name: 'outbox row: peer ÷ bare', subject: 'outbox-row-peer-first', base: 'outbox-row-bare' },
  { name: 'outbox row: replay ÷ peer replay', subject: 'outbox-row-replay', base: 'outbox-row-peer-replay' },
  { name: 'outbox row: replay, cache off ÷ peer replay', subject: 'outbox-row-uncached-replay', base: 'outbox-row-peer-replay' },
  // Made only without the peer, whose replays otherwise stand between the two.
  { name: 'outbox row: replay, cache off ÷ replay, cache on', subject: 'outbox-row-uncached-replay', base: 'outbox-row-replay' },
];

/**
 * The harness profile's walk: first executions in a triangle (bare, the
 * default, the peer, back to bare), then the replays. Without the peer:
 * bare and the default twice a cycle, the two replays of ours once.
 */
const HARNESS_CYCLE: readonly ScenarioId[] = [
  'outbox-row-bare',
  'outbox-row-first',
  'outbox-row-peer-first',
  'outbox-row-bare',
  'outbox-row-replay',
  'outbox-row-peer-replay',
  'outbox-row-uncached-replay',
];

/** Which of a comparison's figures a headline reads: a ratio (req/s, p99, CPU) or a difference (CPU µs/req). */
export type HeadlineMeasure = 'throughput' | 'p99' | 'cpu' | 'appCpuMicros' | 'postgresCpuMicros';

/** One figure of a profile's headline: a measure of one comparison, named as the issue names it. */
export interface HeadlineFigure {
  label: string;
  subject: ScenarioId;
  base: ScenarioId;
  measure: HeadlineMeasure;
}

/** The settings a profile stands for; a run whose flags differ is still made, with a note saying how it differs. */
export interface ProfileSettings {
  poolSize: number;
  connections: number;
  pipeline: boolean;
}

/** A named selection of variants, their comparisons and walk, the apps mounted beside the main one, and what the report leads with. */
export interface PairedProfile {
  name: string;
  /** `--results-name`'s default. */
  resultsName: string;
  variants: readonly Scenario[];
  comparisons: readonly Twins[];
  cycle: readonly ScenarioId[];
  /** Apps mounted beside the main one, by path prefix, with their module options. */
  mounts: NonNullable<BenchAppOptions['mounted']>;
  settings?: ProfileSettings;
  headline?: readonly HeadlineFigure[];
}

const first = 'outbox-row-first';
const bare = 'outbox-row-bare';
const peer = 'outbox-row-peer-first';

/** `--profile`: every comparison (the default), or the outside harness's shape. */
export const PAIRED_PROFILES = {
  default: {
    name: 'default',
    resultsName: 'paired',
    variants: PAIRED_VARIANTS,
    comparisons: COMPARISONS,
    cycle: CYCLE,
    mounts: { [CACHE_OFF_MOUNT.prefix]: CACHE_OFF_MOUNT.idempotency, [NO_SAVEPOINTS_MOUNT.prefix]: NO_SAVEPOINTS_MOUNT.idempotency },
  },
  harness: {
    name: 'harness',
    resultsName: 'harness',
    variants: HARNESS_VARIANTS,
    comparisons: HARNESS_COMPARISONS,
    cycle: HARNESS_CYCLE,
    // Only the app the replays with the cache off need: the harness ran one Nest app.
    mounts: { [CACHE_OFF_MOUNT.prefix]: CACHE_OFF_MOUNT.idempotency },
    settings: { poolSize: 10, connections: 32, pipeline: true },
    headline: [
      { label: 'first ÷ bare, req/s', subject: first, base: bare, measure: 'throughput' },
      { label: 'first ÷ bare, p99', subject: first, base: bare, measure: 'p99' },
      { label: 'first ÷ peer, req/s', subject: first, base: peer, measure: 'throughput' },
      { label: 'first ÷ peer, p99', subject: first, base: peer, measure: 'p99' },
      { label: 'peer ÷ bare, req/s', subject: peer, base: bare, measure: 'throughput' },
      { label: 'peer ÷ bare, p99', subject: peer, base: bare, measure: 'p99' },
      { label: 'replays, cache on ÷ peer replays, req/s', subject: 'outbox-row-replay', base: 'outbox-row-peer-replay', measure: 'throughput' },
      { label: 'replays, cache off ÷ peer replays, req/s', subject: 'outbox-row-uncached-replay', base: 'outbox-row-peer-replay', measure: 'throughput' },
      { label: 'first ÷ bare, CPU µs/req (app + PostgreSQL)', subject: first, base: bare, measure: 'cpu' },
      { label: 'first − bare, app CPU µs/req', subject: first, base: bare, measure: 'appCpuMicros' },
      { label: 'first − bare, PostgreSQL CPU µs/req', subject: first, base: bare, measure: 'postgresCpuMicros' },
    ],
  },
} satisfies Record<string, PairedProfile>;

export type PairedProfileName = keyof typeof PAIRED_PROFILES;

/** Where a run's settings differ from those its profile stands for, one line each; none for a profile without settings. */
export function settingsDeviations(profile: PairedProfile, settings: ProfileSettings): string[] {
  if (!profile.settings) return [];
  const wanted = profile.settings;
  const deviations: string[] = [];
  if (settings.poolSize !== wanted.poolSize) deviations.push(`a pool of ${settings.poolSize}, not ${wanted.poolSize}`);
  if (settings.connections !== wanted.connections) deviations.push(`${settings.connections} connections, not ${wanted.connections}`);
  if (settings.pipeline !== wanted.pipeline) deviations.push(`pipelining ${settings.pipeline ? 'on' : 'off'}, not ${wanted.pipeline ? 'on' : 'off'}`);
  return deviations;
}
