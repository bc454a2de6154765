import type { CpuCost } from '../bench/cpu-cost.js';
import type { PhaseResult } from '../bench/load-protocol.js';
import { PAIRED_COMMAND_LINE, pairedOptions, profileName } from '../bench/paired-options.js';
import { formatHeadline } from '../bench/paired-report.js';
import { HARNESS_COMPARISONS, PAIRED_PROFILES, settingsDeviations, windowSchedule } from '../bench/paired-schedule.js';
import { headlineOf, type PairedWindow, pairsOf, summariseComparisons } from '../bench/paired-statistics.js';
import { parseCommandLine } from '../harness/command-line.js';

/**
 * The paired bench's profiles (`npm run bench:harness` is `--profile
 * harness`): their flags, their walks, and the headline read off the
 * comparisons. No database: the windows here are made up.
 */
const options = (...argv: string[]) => {
  const values = parseCommandLine(PAIRED_COMMAND_LINE, argv);
  if (values === 'help') throw new Error('help');
  return pairedOptions(values);
};

/** A window of `variant` with the given req/s, p99 and CPU µs per request. */
function window(index: number, variant: PairedWindow['variant'], requestsPerSecond: number, p99: number, app = 1000, postgres = 300): PairedWindow {
  const measured = { name: 'window', requestsPerSecond, latencyMs: { average: p99 / 2, p50: p99 / 2, p90: p99, p99, max: p99 } } as PhaseResult;
  const cpu: CpuCost = { answers2xx: 100, appMicros: app * 100, appMicrosPerRequest: app, postgresMicros: postgres * 100, postgresMicrosPerRequest: postgres };
  return { index, variant, measured, cpu, problems: [] };
}

describe('the paired bench’s --profile', () => {
  it('defaults to every comparison, its results named paired', () => {
    expect(options()).toMatchObject({ profile: 'default', resultsName: 'paired', poolSize: 10, connections: 32, pipeline: true });
  });

  it('names the results after the harness profile unless --results-name is given', () => {
    expect(options('--profile', 'harness')).toMatchObject({ profile: 'harness', resultsName: 'harness' });
    expect(options('--profile', 'harness', '--results-name', 'smoke-harness').resultsName).toBe('smoke-harness');
  });

  it('refuses a profile it does not have', () => {
    expect(() => profileName('quick', 'profile')).toThrow('--profile must be one of default, harness, got "quick"');
    expect(() => options('--profile', 'quick')).toThrow(/--profile must be one of/);
  });

  it('notes where a run’s settings are not the harness’s: a pool of 10, 32 connections, pipelining on', () => {
    const harness = PAIRED_PROFILES.harness;
    expect(settingsDeviations(harness, { poolSize: 10, connections: 32, pipeline: true })).toEqual([]);
    expect(settingsDeviations(harness, options('--profile', 'harness', '--connections', '4', '--no-pipeline'))).toEqual(['4 connections, not 32', 'pipelining off, not on']);
    expect(settingsDeviations(PAIRED_PROFILES.default, { poolSize: 3, connections: 1, pipeline: false })).toEqual([]);
  });

  it('mounts only the replay-cache-off app beside the harness profile’s main one', () => {
    expect(Object.keys(PAIRED_PROFILES.harness.mounts)).toEqual(['cache-off']);
    expect(Object.keys(PAIRED_PROFILES.default.mounts)).toEqual(['cache-off', 'no-savepoints']);
  });
});

describe('the harness profile’s walk', () => {
  const { variants, cycle, comparisons } = PAIRED_PROFILES.harness;
  /** Every comparison's pair count and how many of them ran the subject first, over `cycles` cycles of `ids`. */
  const pairCounts = (cycles: number, ids = variants) => {
    const schedule = windowSchedule(cycles, ids, cycle);
    const pairs = pairsOf(
      schedule.map((variant, position) => window(position + 1, variant.id, 100, 10)),
      comparisons,
    );
    return Object.fromEntries(comparisons.map((comparison) => [comparison.name, [pairs.filter((pair) => pair.comparison === comparison.name).length, pairs.filter((pair) => pair.comparison === comparison.name && pair.subjectFirst).length]]));
  };

  it('gives each comparison with the peer one pair per cycle, the subject first in half of them', () => {
    const counts = pairCounts(4);
    expect(counts).toEqual({
      'outbox row: module’s default ÷ bare': [4, 2],
      'outbox row: module’s default ÷ peer': [4, 2],
      'outbox row: peer ÷ bare': [4, 2],
      'outbox row: replay ÷ peer replay': [4, 2],
      'outbox row: replay, cache off ÷ peer replay': [4, 2],
      'outbox row: replay, cache off ÷ replay, cache on': [0, 0],
    });
    // 7 windows a cycle, the variant at each turn once: 6n + 1.
    expect(windowSchedule(4, variants, cycle)).toHaveLength(25);
  });

  it('without the peer, pairs bare and the default twice a cycle, and the replays of ours once', () => {
    const counts = pairCounts(
      4,
      variants.filter((variant) => !variant.peer),
    );
    expect(counts['outbox row: module’s default ÷ bare']).toEqual([8, 4]);
    expect(counts['outbox row: replay, cache off ÷ replay, cache on']).toEqual([4, 2]);
    expect(counts['outbox row: peer ÷ bare']).toEqual([0, 0]);
  });

  it('sends its replays with the cache off to the mounted app, and the peer’s to its route', () => {
    const path = (id: string) => variants.find((variant) => variant.id === id)?.path;
    expect(path('outbox-row-uncached-replay')).toBe('/cache-off/bench/outbox-row/idempotent');
    expect(path('outbox-row-replay')).toBe('/bench/outbox-row/idempotent');
    expect(path('outbox-row-peer-replay')).toBe('/bench/peer/outbox-row');
    expect(variants.filter((variant) => variant.keys === 'cycle').map((variant) => variant.id)).toEqual(['outbox-row-replay', 'outbox-row-uncached-replay', 'outbox-row-peer-replay']);
  });
});

describe('the harness profile’s headline', () => {
  // Two cycles: bare, first, peer, bare, then back. First executions at 600 req/s against bare's 1000 and the peer's 800.
  const windows = [
    window(1, 'outbox-row-bare', 1000, 10, 700, 250),
    window(2, 'outbox-row-first', 600, 15, 1300, 400),
    window(3, 'outbox-row-peer-first', 800, 12, 900, 260),
    window(4, 'outbox-row-bare', 1000, 10, 700, 250),
    window(5, 'outbox-row-replay', 5000, 4, 200, 0),
    window(6, 'outbox-row-peer-replay', 4000, 4, 250, 0),
    window(7, 'outbox-row-uncached-replay', 2000, 6, 400, 90),
    window(8, 'outbox-row-peer-replay', 4000, 5, 250, 0),
    window(9, 'outbox-row-replay', 6000, 4, 200, 0),
  ];
  const comparisons = summariseComparisons(pairsOf(windows, HARNESS_COMPARISONS), HARNESS_COMPARISONS);
  const rows = headlineOf(PAIRED_PROFILES.harness.headline, comparisons);
  const figure = (label: string) => rows.find((row) => row.label === label);

  it('reads each figure off its comparison: ratios of req/s and p99, differences of CPU µs', () => {
    expect(figure('first ÷ bare, req/s')).toMatchObject({ pairs: 1, spread: { median: 0.6 } });
    expect(figure('first ÷ bare, p99')?.spread?.median).toBeCloseTo(1.5);
    expect(figure('first ÷ peer, req/s')?.spread?.median).toBeCloseTo(0.75);
    expect(figure('peer ÷ bare, req/s')?.spread?.median).toBeCloseTo(0.8);
    expect(figure('replays, cache off ÷ peer replays, req/s')?.spread?.median).toBeCloseTo(0.5);
    expect(figure('first − bare, app CPU µs/req')?.spread?.median).toBe(600);
    expect(figure('first − bare, PostgreSQL CPU µs/req')?.spread?.median).toBe(150);
    expect(figure('first ÷ bare, CPU µs/req (app + PostgreSQL)')?.spread?.median).toBeCloseTo(1700 / 950);
  });

  it('takes the median over pairs, in either order of the windows', () => {
    // replay ÷ peer replay: 5000/4000 (subject first) and 6000/4000 (base first).
    expect(figure('replays, cache on ÷ peer replays, req/s')).toMatchObject({ pairs: 2, spread: { median: 1.375, low: 1.25, high: 1.5 } });
  });

  it('prints a figure whose comparison made no pair as not run', () => {
    const withoutPeer = headlineOf(PAIRED_PROFILES.harness.headline, summariseComparisons(pairsOf(windows.slice(0, 2), HARNESS_COMPARISONS), HARNESS_COMPARISONS));
    expect(withoutPeer.find((row) => row.label === 'first ÷ peer, req/s')).toMatchObject({ pairs: 0, comparison: undefined });
    expect(withoutPeer.find((row) => row.label === 'first ÷ peer, req/s')).not.toHaveProperty('spread');
    const printed = formatHeadline(withoutPeer);
    expect(printed).toMatch(/first ÷ bare, req\/s\s+0\.600/);
    expect(printed).toMatch(/first ÷ peer, req\/s\s+-\s+-\s+-\s+0\s+not run/);
    expect(printed).toMatch(/first − bare, app CPU µs\/req\s+\+600/);
  });
});
