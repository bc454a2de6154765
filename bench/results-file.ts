import { execFile } from 'node:child_process';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { cpus, loadavg, totalmem } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { BenchOptions } from './cli-options.js';
import type { HeadlineRatios, RatioToBare, ScenarioRun, ScenarioSummary, TwinRatio } from './statistics.js';

/** The checkout: this file runs from dist/bench/. */
const CHECKOUT_DIR = fileURLToPath(new URL('../../', import.meta.url));

/** Where results are written: bench/results/ in the checkout, not in dist/. */
export const RESULTS_DIR = join(CHECKOUT_DIR, 'bench', 'results');

/** The machine the numbers come from, and what shared it. */
export interface MachineDescription {
  /** One line for people, e.g. `2 × AMD EPYC, shared by …`. */
  line: string;
  cpuCount: number;
  cpuModel: string;
  memoryGiB: number;
  node: string;
  database: string;
  /** 1, 5 and 15 minute load averages, at the start and the end: other work on the machine shows here. */
  loadAverageAtStart: number[];
  /** The share of CPU time other work used in the 3 s before the run started anything. */
  busyBeforeStart: number;
  loadAverageAtEnd?: number[];
}

/** Everything `bench/results/<name>.json` holds. */
export interface BenchResults {
  generatedAt: string;
  commit?: string;
  command: RunCommand;
  settings: BenchOptions;
  machine: MachineDescription;
  notes: string[];
  headline: HeadlineRatios;
  /** Each scenario against its twin (encryption, read-first, pipelining), where both ran. */
  twins: TwinRatio[];
  ratiosToBare: RatioToBare[];
  scenarios: ScenarioSummary[];
  /** Raw numbers of every phase of every scenario in every round. */
  runs: ScenarioRun[];
}

/** Describes this machine; the load average is taken now. */
export function describeMachine(database: string, busyBeforeStart: number): MachineDescription {
  const cpuList = cpus();
  const cpuModel = cpuList[0]?.model.trim() ?? 'unknown CPU';
  return {
    line: `${cpuList.length} × ${cpuModel}; ${database}, the bench app and the load generator (autocannon) all share these ${cpuList.length} CPUs`,
    cpuCount: cpuList.length,
    cpuModel,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    database,
    loadAverageAtStart: loadavg().map(round2),
    busyBeforeStart,
  };
}

/** How this run was started: the command line from the checkout (`node dist/bench/paired.js --pairs 4`), and the npm script that ran it, if any. */
export interface RunCommand {
  commandLine: string;
  npmScript?: string;
}

/** The command line of this process, with its script relative to the checkout, so that it names no machine's paths. */
export function runCommand(): RunCommand {
  const quoted = (arg: string) => (/^[\w.,:=/@+-]+$/.test(arg) ? arg : JSON.stringify(arg));
  const commandLine = ['node', relative(CHECKOUT_DIR, process.argv[1]), ...process.argv.slice(2)].map(quoted).join(' ');
  return { commandLine, ...(process.env.npm_lifecycle_event && { npmScript: process.env.npm_lifecycle_event }) };
}

/** The checked-out commit, when this is a git checkout with git installed. */
export async function currentCommit(): Promise<string | undefined> {
  try {
    const { stdout } = await promisify(execFile)('git', ['rev-parse', 'HEAD'], { cwd: CHECKOUT_DIR });
    return stdout.trim() || undefined;
  } catch {
    return undefined;
  }
}

/** Writes `<name>.json` and `<name>.svg` under bench/results/, each through a temporary file so no reader sees half of one. */
export function writeResults(name: string, results: BenchResults, svg: string | undefined): Promise<string[]> {
  return writeResultFiles(name, results, svg);
}

/** Writes any results object as `<name>.json`, and `<name>.svg` when given, under bench/results/, each atomically. */
export async function writeResultFiles(name: string, results: object, svg: string | undefined): Promise<string[]> {
  await mkdir(RESULTS_DIR, { recursive: true });
  const written = [await writeAtomically(join(RESULTS_DIR, `${name}.json`), `${JSON.stringify(results, null, 2)}\n`)];
  if (svg !== undefined) written.push(await writeAtomically(join(RESULTS_DIR, `${name}.svg`), svg));
  return written;
}

async function writeAtomically(path: string, text: string): Promise<string> {
  const draft = `${path}.${process.pid}.tmp`;
  await writeFile(draft, text);
  await rename(draft, path);
  return path;
}

/** To two decimals, as the results keep shares and load averages. */
export function round2(value: number): number {
  return Math.round(value * 100) / 100;
}
