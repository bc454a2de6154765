import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { createBenchDatabase } from './bench-database.js';
import { type BenchAppProcess, startBenchApp, startLoadGenerator } from './child-processes.js';
import type { BenchOptions } from './cli-options.js';
import type { CleanupStack } from '../harness/cleanup-stack.js';
import type { PeerOptions } from './peer-orders.controller.js';
import { CpuMeter, openCpuMeter } from './cpu-cost.js';
import type { LoadPhase, PhaseResult } from './load-protocol.js';
import { peerFor } from './peer-setup.js';
import { fixed, formatReport } from './report-table.js';
import { renderResultsChart } from './results-chart.js';
import { machineBeforeRun } from './machine-load.js';
import { currentCommit, describeMachine, round2, runCommand, writeResults } from './results-file.js';
import { APP_VARIANTS, type BenchAppVariant, loadJobFor, problemsOf, SCENARIOS, type Scenario } from './scenarios.js';
import { headlineRatios, ratiosToBare, summarise, twinRatios, type ScenarioRun } from './statistics.js';

/** Slack on top of a job's own duration before the runner gives up on the load generator. */
const JOB_SLACK_MS = 120_000;

/**
 * One bench run: a fresh database, the bench app and the load generator as
 * child processes, every scenario once per round, interleaved (in reverse
 * every other round), then the report, `bench/results/<name>.json` and `.svg`.
 * Resolves to the exit code: 1 when any scenario had a problem.
 */
export async function runBenchSession(options: BenchOptions, cleanup: CleanupStack, log: (line: string) => void): Promise<number> {
  const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
  const notes = [
    'Absolute numbers depend on this machine and on whatever else ran on it (see machine.busyBeforeStart and machine.loadAverage*); compare the ratios, which come from one run with interleaved rounds.',
  ];

  const before = await machineBeforeRun(log);
  if (before.warning) notes.push(before.warning);
  const database = await createBenchDatabase(runId, log);
  cleanup.add('database', database.close);
  const machine = describeMachine(database.description, before.busyShare);
  const peer = await peerFor(options, !options.only || options.only.some((id) => id.startsWith('peer-')), runId, cleanup, notes, log);
  const scenarios = SCENARIOS.filter((scenario) => (!scenario.peer || peer) && (!options.only || options.only.includes(scenario.id)));

  const apps = await startApps(scenarios, database.url, options.poolSize, peer, cleanup);
  const load = startLoadGenerator();
  cleanup.add('load generator', () => load.process.stop());
  const appDied = Promise.race(
    [...apps].map(([variant, app]) => app.process.ended.then((end) => Promise.reject(new Error(`the ${variant} bench app exited (code ${end.code}) during the run`)))),
  );
  appDied.catch(() => undefined);
  if (apps.size > 1) notes.push(`Scenarios ran against ${apps.size} bench app processes (${[...apps.keys()].join(', ')}), each idle while another is measured.`);

  const cpu = await openCpuMeter(database.url, peer?.redisUrl, cleanup, notes);

  log(machine.line);
  log(`${plural(options.rounds, 'round')} × ${plural(scenarios.length, 'scenario')}, ${options.durationSeconds} s each after ${options.warmupSeconds} s of warm-up, ${options.connections} connections, a pool of ${options.poolSize}`);
  const runs: ScenarioRun[] = [];
  for (let round = 1; round <= options.rounds; round++) {
    // What ran just before leaves work behind (autovacuum, dirty pages): every other round runs in reverse, so no scenario always follows the same one.
    for (const scenario of round % 2 === 1 ? scenarios : [...scenarios].reverse()) {
      const app = apps.get(scenario.app)!;
      const job = loadJobFor(scenario, round, options, runId, app.url);
      const timeoutMs = (options.warmupSeconds + options.durationSeconds) * 1000 + JOB_SLACK_MS;
      const runPhases = async (phases: LoadPhase[]): Promise<PhaseResult[]> => (phases.length ? Promise.race([load.run({ ...job, phases }, timeoutMs), appDied]) : []);
      // The CPU readings bracket the measured phase only: the warm-up and the replay pool's preparation run first.
      const phases = await runPhases(job.phases.filter((phase) => phase.name !== 'measure'));
      const before = await cpu.read(app, scenario.peer);
      phases.push(...(await runPhases(job.phases.filter((phase) => phase.name === 'measure'))));
      const after = await cpu.read(app, scenario.peer);
      const measured = phases[phases.length - 1];
      const run: ScenarioRun = {
        scenario: scenario.id,
        round,
        phases,
        measured,
        cpu: CpuMeter.cost(before, after, measured.fresh2xx + measured.replayed2xx),
        problems: problemsOf(scenario, phases),
      };
      runs.push(run);
      log(progressLine(scenario, run, options.rounds));
    }
  }
  machine.loadAverageAtEnd = loadavg().map(round2);

  const summaries = summarise(scenarios, runs);
  const ratios = ratiosToBare(summaries, runs);
  const headline = headlineRatios(ratios, summaries);
  const twins = twinRatios(summaries, runs);
  console.log(`\n${formatReport(runs, summaries, ratios, headline, twins)}\n`);
  console.log(`Machine: ${machine.line}; load average ${machine.loadAverageAtStart.join(' ')} at the start, ${machine.loadAverageAtEnd.join(' ')} at the end.`);

  const svg = await renderResultsChart(runs, summaries, machine.line).catch((error: unknown) => {
    notes.push(`The chart could not be drawn: ${String(error)}`);
    return undefined;
  });
  const written = await writeResults(options.resultsName, { generatedAt: new Date().toISOString(), commit: await currentCommit(), command: runCommand(), settings: options, machine, notes, headline, twins, ratiosToBare: ratios, scenarios: summaries, runs }, svg);
  log(`wrote ${written.join(', ')}`);
  for (const note of notes) log(`note: ${note}`);

  const problems = summaries.flatMap((summary) => summary.problems.map((problem) => `${summary.label}, ${problem}`));
  for (const problem of problems) log(`PROBLEM: ${problem}`);
  return problems.length ? 1 : 0;
}

/**
 * One bench app process per variant the scenarios load, started one after
 * another so that only the first runs the migrations on the fresh database.
 */
async function startApps(scenarios: readonly Scenario[], databaseUrl: string, poolSize: number, peer: PeerOptions | undefined, cleanup: CleanupStack): Promise<Map<BenchAppVariant, BenchAppProcess>> {
  const apps = new Map<BenchAppVariant, BenchAppProcess>();
  for (const variant of Object.keys(APP_VARIANTS) as BenchAppVariant[]) {
    if (!scenarios.some((scenario) => scenario.app === variant)) continue;
    const app = await startBenchApp({ databaseUrl, poolSize, ...(variant === 'main' && { peer }), ...APP_VARIANTS[variant]() });
    cleanup.add(`${variant} bench app`, () => app.process.stop());
    apps.set(variant, app);
  }
  return apps;
}

function progressLine(scenario: Scenario, run: ScenarioRun, rounds: number): string {
  const { requestsPerSecond, latencyMs, non2xx } = run.measured;
  const redis = run.cpu.redisMicros !== undefined ? ` redis ${micros(run.cpu.redisMicrosPerRequest)}` : '';
  const cpu = `  CPU µs/req app ${micros(run.cpu.appMicrosPerRequest)} pg ${micros(run.cpu.postgresMicrosPerRequest)}${redis}`;
  const numbers = `${requestsPerSecond.toFixed(0).padStart(6)} req/s  p50 ${fixed(latencyMs.p50, 1).padStart(6)} ms  p99 ${fixed(latencyMs.p99, 1).padStart(6)} ms${cpu}  non-2xx ${non2xx}`;
  const problems = run.problems.length ? `  PROBLEM: ${run.problems.join('; ')}` : '';
  return `round ${run.round}/${rounds}  ${scenario.label.padEnd(22)} ${numbers}${problems}`;
}

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}

function micros(value: number | undefined): string {
  return value === undefined || !Number.isFinite(value) ? '-' : value.toFixed(0);
}
