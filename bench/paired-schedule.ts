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
  variant('at-commit-first'),
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
  // The default claim mode is 'first': the same work twice, so this pair shows the method's own noise.
  { name: 'claim first, pinned ÷ module’s default (same work)', subject: 'claim-first-first', base: 'first' },
  { name: 'at commit ÷ claim first', subject: 'at-commit-first', base: 'claim-first-first' },
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
  'at-commit-first',
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
export function windowSchedule(cycles: number, variants: readonly Scenario[]): Scenario[] {
  const byId = new Map(variants.map((scenario) => [scenario.id, scenario]));
  const walk = CYCLE.filter((id) => byId.has(id));
  const windows: Scenario[] = [];
  for (let cycle = 0; cycle < cycles; cycle++) {
    for (const id of cycle % 2 === 0 ? walk : [...walk].reverse()) {
      if (windows[windows.length - 1]?.id !== id) windows.push(byId.get(id)!);
    }
  }
  return windows;
}

/** The comparison two neighbouring windows make, in either order, if any. */
export function comparisonOf(one: ScenarioId, other: ScenarioId): Twins | undefined {
  return COMPARISONS.find((comparison) => (comparison.subject === one && comparison.base === other) || (comparison.subject === other && comparison.base === one));
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
