import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CleanupStack } from '../harness/cleanup-stack.js';
import { createBenchDatabase } from './bench-database.js';
import { type BenchAppProcess, type LoadGeneratorProcess, startBenchApp, startLoadGenerator } from './child-processes.js';
import { CpuMeter, openCpuMeter } from './cpu-cost.js';
import { machineBeforeRun } from './machine-load.js';
import { renderPairedChart } from './paired-chart.js';
import type { PairedOptions } from './paired-options.js';
import { formatPairedReport, windowLine } from './paired-report.js';
import { CACHE_OFF_MOUNT, NO_SAVEPOINTS_MOUNT, PAIRED_PROFILES, type PairedProfile, settingsDeviations, targetOf, windowSchedule } from './paired-schedule.js';
import { headlineOf, type PairedWindow, pairsOf, summariseComparisons, summariseVariants } from './paired-statistics.js';
import { peerFor } from './peer-setup.js';
import { currentCommit, describeMachine, round2, runCommand, writeResultFiles } from './results-file.js';
import { ORDER_BODY, problemsOf, type Scenario } from './scenarios.js';

/** How long completing one replay pool may take before the runner gives up on the load generator. */
const PREPARE_TIMEOUT_MS = 120_000;

/**
 * One paired run: a fresh database, one bench app process holding every
 * variant's route (and the replay-cache-off app mounted beside its main
 * one), and one open load that moves from variant to variant in short
 * windows, along the schedule of `paired-schedule.ts`. Then the paired
 * report, `bench/results/<name>.json` and `.svg`. Resolves to the exit
 * code: 1 when any window had a problem.
 */
export async function runPairedSession(options: PairedOptions, cleanup: CleanupStack, log: (line: string) => void): Promise<number> {
  const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
  const profile: PairedProfile = PAIRED_PROFILES[options.profile];
  const notes = [
    'Absolute numbers depend on this machine and on whatever else ran on it (see machine.busyBeforeStart and machine.loadAverage*); compare the paired ratios, each of two neighbouring windows of one app process.',
    ...(CACHE_OFF_MOUNT.prefix in profile.mounts
      ? [`The replay-cache-off variant ran on a second Nest app in the same process, mounted under /${CACHE_OFF_MOUNT.prefix} on the main app's DataSource (see bench/README.md).`]
      : []),
    ...(NO_SAVEPOINTS_MOUNT.prefix in profile.mounts ? [`The no-unit-savepoints variant ran on a third, mounted under /${NO_SAVEPOINTS_MOUNT.prefix}.`] : []),
  ];
  const deviations = settingsDeviations(profile, options);
  if (deviations.length) notes.push(`Not the ${profile.name} profile's settings: ${deviations.join(', ')}.`);
  const before = await machineBeforeRun(log);
  if (before.warning) notes.push(before.warning);
  const database = await createBenchDatabase(runId, log);
  cleanup.add('database', database.close);
  const machine = describeMachine(database.description, before.busyShare);
  const peer = await peerFor(options, true, runId, cleanup, notes, log);
  const variants = profile.variants.filter((variant) => (!variant.peer || peer) && (!options.only || options.only.includes(variant.id)));
  if (options.only && variants.length < options.only.length) throw new Error(`--only: no variant of the ${profile.name} profile ${options.only.filter((id) => !variants.some((variant) => variant.id === id)).join(', ')}`);
  if (!options.pipeline) notes.push("node-postgres pipelining was off on the bench app's DataSource (--no-pipeline).");
  const schedule = windowSchedule(options.pairs, variants, profile.cycle);

  const app = await startBenchApp({
    databaseUrl: database.url,
    poolSize: options.poolSize,
    pipeline: options.pipeline,
    peer,
    mounted: profile.mounts,
  });
  cleanup.add('bench app', () => app.process.stop());
  const load = startLoadGenerator();
  cleanup.add('load generator', () => load.process.stop());
  const appDied = app.process.ended.then((end) => Promise.reject(new Error(`the bench app exited (code ${end.code}) during the run`)));
  appDied.catch(() => undefined);
  const whileAppRuns = <T>(work: Promise<T>): Promise<T> => Promise.race([work, appDied]);
  const cpu = await openCpuMeter(database.url, peer?.redisUrl, cleanup, notes);

  log(machine.line);
  const minutes = Math.ceil((schedule.length * (options.windowSeconds + options.settleSeconds) + variants.length * options.warmupSeconds) / 60);
  log(
    `${schedule.length} windows (${options.pairs} pairs per comparison) of ${options.windowSeconds} s, each after ${options.settleSeconds} s of settling; ` +
      `${options.connections} connections, a pool of ${options.poolSize}; about ${minutes} minute${minutes === 1 ? '' : 's'}`,
  );
  const problems = await whileAppRuns(prepareReplayPools(variants, app, load, options, runId, log));
  await whileAppRuns(load.open(app.url, ORDER_BODY, options.connections, targetOf(schedule[0], runId, 'warm', options.replayKeys)));
  // Once per variant before the first window: the JIT compiles each route's code, caches fill, connections open.
  for (const variant of variants) {
    await whileAppRuns(load.aim(targetOf(variant, runId, 'warm', options.replayKeys)));
    await whileAppRuns(sleep(options.warmupSeconds * 1000));
  }

  const windows: PairedWindow[] = [];
  for (const [position, variant] of schedule.entries()) {
    const index = position + 1;
    await whileAppRuns(load.aim(targetOf(variant, runId, `w${index}`, options.replayKeys)));
    await whileAppRuns(sleep(options.settleSeconds * 1000));
    // The tally and the CPU readings are asked for together, so that they bracket the same stretch of load.
    const [, start] = await whileAppRuns(Promise.all([load.tally('settle'), cpu.read(app, variant.peer)]));
    await whileAppRuns(sleep(options.windowSeconds * 1000));
    const [measured, end] = await whileAppRuns(Promise.all([load.tally('window'), cpu.read(app, variant.peer)]));
    const window: PairedWindow = {
      index,
      variant: variant.id,
      measured,
      cpu: CpuMeter.cost(start, end, measured.fresh2xx + measured.replayed2xx),
      problems: problemsOf(variant, [measured]),
    };
    windows.push(window);
    log(windowLine(window, windows[position - 1], variant.label, schedule.length, profile.comparisons));
  }
  await whileAppRuns(load.close());
  machine.loadAverageAtEnd = loadavg().map(round2);

  const pairs = pairsOf(windows, profile.comparisons);
  const comparisons = summariseComparisons(pairs, profile.comparisons);
  const summaries = summariseVariants(variants, windows);
  const headline = profile.headline && headlineOf(profile.headline, comparisons);
  console.log(`\n${formatPairedReport(comparisons, summaries, headline)}\n`);
  console.log(`Machine: ${machine.line}; load average ${machine.loadAverageAtStart.join(' ')} at the start, ${machine.loadAverageAtEnd.join(' ')} at the end.`);

  const svg = await renderPairedChart(pairs, comparisons, machine.line).catch((error: unknown) => {
    notes.push(`The chart could not be drawn: ${String(error)}`);
    return undefined;
  });
  const results = {
    generatedAt: new Date().toISOString(),
    commit: await currentCommit(),
    command: runCommand(),
    method: 'paired',
    profile: profile.name,
    settings: options,
    machine,
    notes,
    ...(headline && { headline }),
    comparisons,
    variants: summaries,
    pairs,
    windows,
  };
  log(`wrote ${(await writeResultFiles(options.resultsName, results, svg)).join(', ')}`);
  for (const note of notes) log(`note: ${note}`);

  problems.push(...summaries.flatMap((summary) => summary.problems.map((problem) => `${summary.label}, ${problem}`)));
  for (const problem of problems) log(`PROBLEM: ${problem}`);
  return problems.length ? 1 : 0;
}

/** Completes each replay variant's pool of keys once, before the load opens; resolves to the problems seen. */
async function prepareReplayPools(variants: readonly Scenario[], app: BenchAppProcess, load: LoadGeneratorProcess, options: PairedOptions, runId: string, log: (line: string) => void): Promise<string[]> {
  const problems: string[] = [];
  for (const variant of variants.filter((candidate) => candidate.keys === 'cycle')) {
    const { keys } = targetOf(variant, runId, 'prepare', options.replayKeys);
    const connections = Math.min(options.connections, options.replayKeys);
    const phases = await load.run({ url: app.url + variant.path, body: ORDER_BODY, phases: [{ name: 'prepare', connections, amount: options.replayKeys, keys }] }, PREPARE_TIMEOUT_MS);
    problems.push(...problemsOf(variant, phases).map((problem) => `${variant.label}, ${problem}`));
    log(`prepared ${options.replayKeys} keys for ${variant.label} in ${phases[0].durationSeconds} s`);
  }
  return problems;
}
