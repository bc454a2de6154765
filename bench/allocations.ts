/**
 * `npm run bench:allocations`: what a first execution allocates on V8's
 * heap beside the bare transaction, in the bench app process, in pairs of
 * blocks of requests; and where the difference is allocated, by module and
 * site. See bench/README.md.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type AllocationBlock, blockOf, formatAllocationReport, type SourceResolver, summariseAllocations, targetVerdict } from './allocation-report.js';
import { ALLOCATION_SHAPES, ALLOCATIONS_COMMAND_LINE, allocationOptions, blockOrder } from './allocation-options.js';
import { createBenchDatabase } from './bench-database.js';
import { startBenchApp, startLoadGenerator } from './child-processes.js';
import { runBenchCommand } from './command-main.js';
import { machineBeforeRun } from './machine-load.js';
import { currentCommit, describeMachine, round2, runCommand, writeResultFiles } from './results-file.js';
import { ORDER_BODY, problemsOf } from './scenarios.js';

/** The checkout: this file runs from dist/bench/. */
const CHECKOUT_DIR = fileURLToPath(new URL('../../', import.meta.url));
/** How long one block may take before the runner gives up on the load generator. */
const BLOCK_TIMEOUT_MS = 120_000;
/** What every block's answers must be: 201, first executions (fresh keys). */
const FIRST_EXECUTIONS = { statuses: [201], replays: 'none' } as const;

runBenchCommand({
  tag: 'allocations',
  line: ALLOCATIONS_COMMAND_LINE,
  options: allocationOptions,
  session: async (options, cleanup, log) => {
    const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
    const notes = [
      "Bytes allocated on V8's heap by the whole bench app process during each block (the reaper's passes and the pool's keepalives included, alike on both sides), divided by the block's 2xx answers; memory outside V8's heap (Buffers' contents) is not counted.",
      'Modules and sites come from the sampling heap profiler: estimates whose sum should agree with the total within a few %.',
    ];
    const before = await machineBeforeRun(log);
    if (before.warning) notes.push(before.warning);
    const database = await createBenchDatabase(runId, log);
    cleanup.add('database', database.close);
    const machine = describeMachine(database.description, before.busyShare);
    const app = await startBenchApp({ databaseUrl: database.url, poolSize: options.poolSize, pipeline: true });
    cleanup.add('bench app', () => app.process.stop());
    const load = startLoadGenerator();
    cleanup.add('load generator', () => load.process.stop());
    log(machine.line);

    const problems: string[] = [];
    const run = async (path: string, amount: number, prefix: string) => {
      const [phase] = await load.run({ url: app.url + path, body: ORDER_BODY, phases: [{ name: 'measure', connections: Math.min(options.connections, amount), amount, keys: { mode: 'fresh', prefix } }] }, BLOCK_TIMEOUT_MS);
      problems.push(...problemsOf(FIRST_EXECUTIONS, [phase]).map((problem) => `${path} ${prefix}: ${problem}`));
      return phase;
    };
    const sourceOf = sourceMaps();
    const shapes = [];
    for (const shape of options.shapes) {
      const routes = ALLOCATION_SHAPES[shape];
      log(`${shape}: ${routes.label}; ${options.pairs} pairs of blocks of ${options.requests} requests, ${options.connections} connections`);
      for (const variant of ['bare', 'first'] as const) if (options.warmupRequests > 0) await run(routes[variant], options.warmupRequests, `${runId}.${shape}.${variant}.warm`);
      const blocks: AllocationBlock[] = [];
      for (let pair = 1; pair <= options.pairs; pair++) {
        for (const variant of blockOrder(pair)) {
          await app.startAllocations(options.samplingInterval);
          const phase = await run(routes[variant], options.requests, `${runId}.${shape}.${variant}.p${pair}`);
          const recording = await app.stopAllocations();
          const block = blockOf(pair, variant, recording, phase.fresh2xx + phase.replayed2xx, CHECKOUT_DIR, sourceOf);
          blocks.push(block);
          log(
            `${shape} pair ${pair}/${options.pairs} ${variant.padEnd(5)} ${(block.bytesPerRequest / 1024).toFixed(1).padStart(7)} KB/req ` +
              `(sampled ${(block.sampledBytesPerRequest / 1024).toFixed(1)})  ${block.answers} answers  ${block.garbageCollections} collections`,
          );
        }
      }
      const summary = summariseAllocations(blocks, 'first', 'bare');
      console.log(`\n${routes.label}\n${formatAllocationReport(summary, options.top)}\n`);
      shapes.push({ shape, label: routes.label, routes, verdict: targetVerdict(summary.difference), summary: { ...summary, modules: summary.modules.slice(0, 100), sites: summary.sites.slice(0, 200) }, blocks });
    }
    machine.loadAverageAtEnd = loadavg().map(round2);
    console.log(`Machine: ${machine.line}; load average ${machine.loadAverageAtStart.join(' ')} at the start, ${machine.loadAverageAtEnd.join(' ')} at the end.`);
    const results = { generatedAt: new Date().toISOString(), commit: await currentCommit(), command: runCommand(), method: 'allocations', settings: options, machine, notes, shapes };
    // Blocks keep their totals; their per-site maps would make the file large.
    const slim = { ...results, shapes: shapes.map((shape) => ({ ...shape, blocks: shape.blocks.map(({ bySite: _sites, ...block }) => block) })) };
    log(`wrote ${(await writeResultFiles(options.resultsName, slim, undefined)).join(', ')}`);
    for (const note of notes) log(`note: ${note}`);
    for (const problem of problems) log(`PROBLEM: ${problem}`);
    return problems.length ? 1 : 0;
  },
});

/** Reads a compiled file's source map, once, for the source it was built from. */
function sourceMaps(): SourceResolver {
  const cache = new Map<string, string | undefined>();
  return (path) => {
    if (!cache.has(path)) {
      let source: string | undefined;
      const map = `${path}.map`;
      if (existsSync(map)) {
        try {
          const { sources, sourceRoot } = JSON.parse(readFileSync(map, 'utf8')) as { sources?: string[]; sourceRoot?: string };
          if (sources?.length === 1) source = resolve(dirname(map), sourceRoot ?? '', sources[0]);
        } catch {
          source = undefined;
        }
      }
      cache.set(path, source);
    }
    return cache.get(path);
  };
}
