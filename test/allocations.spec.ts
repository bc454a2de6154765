import { join } from 'node:path';
import { ALLOCATIONS_COMMAND_LINE, allocationOptions, blockOrder, shapeList } from '../bench/allocation-options.js';
import { type AllocationBlock, blockOf, formatAllocationReport, moduleOf, NATIVE, summariseAllocations, targetVerdict } from '../bench/allocation-report.js';
import { AllocationRecorder, flatten } from '../bench/heap-allocations.js';
import { parseCommandLine } from '../harness/command-line.js';

/**
 * `npm run bench:allocations`: its flags, the grouping of allocation sites
 * by module, and the paired summary of bytes per request. The recorder is
 * tried on this process; the bench app is left to `npm run bench:smoke`.
 */
const ROOT = '/checkout';

describe('bench:allocations’ flags', () => {
  const options = (...argv: string[]) => {
    const values = parseCommandLine(ALLOCATIONS_COMMAND_LINE, argv);
    if (values === 'help') throw new Error('help');
    return allocationOptions(values);
  };

  it('defaults to the harness shape, a pool of 10 and 32 connections', () => {
    expect(options()).toMatchObject({ shapes: ['harness'], poolSize: 10, connections: 32, samplingInterval: 4096, resultsName: 'allocations' });
  });

  it('takes several shapes, each once, and refuses an unknown one', () => {
    expect(shapeList('harness, orders,harness', 'shape')).toEqual(['harness', 'orders']);
    expect(() => shapeList('harness,bogus', 'shape')).toThrow('--shape takes harness, orders, two-rows, interceptor (comma-separated), got "harness,bogus"');
    expect(() => shapeList(' , ', 'shape')).toThrow(/--shape takes/);
  });

  it('runs bare first in odd pairs and the default first in even ones', () => {
    expect([1, 2, 3].map(blockOrder)).toEqual([
      ['bare', 'first'],
      ['first', 'bare'],
      ['bare', 'first'],
    ]);
  });
});

describe('the module of an allocation site', () => {
  it('names packages by their innermost node_modules folder, scoped names whole', () => {
    expect(moduleOf('file:///checkout/node_modules/pg/lib/query.js', ROOT)).toBe('node_modules/pg');
    expect(moduleOf('file:///checkout/node_modules/@nestjs/core/router/router-execution-context.js', ROOT)).toBe('node_modules/@nestjs/core');
    expect(moduleOf('/checkout/node_modules/a/node_modules/rxjs/dist/cjs/internal/Observable.js', ROOT)).toBe('node_modules/rxjs');
  });

  it('names Node’s library by its part, and V8’s frames without a script as native', () => {
    expect(moduleOf('node:internal/async_hooks', ROOT)).toBe('node:internal/async_hooks');
    expect(moduleOf('node:internal/streams/readable', ROOT)).toBe('node:internal/streams');
    expect(moduleOf('node:_http_server', ROOT)).toBe('node:_http_server');
    expect(moduleOf('', ROOT)).toBe(NATIVE);
  });

  it('reads the checkout’s compiled files through their source maps, as folders of the sources', () => {
    const sourceOf = (path: string) => (path.endsWith('handler-run.js') ? join(ROOT, 'src/idempotency/flow/handler-run.ts') : undefined);
    expect(moduleOf('file:///checkout/dist/src/idempotency/flow/handler-run.js', ROOT, sourceOf)).toBe('src/idempotency/flow');
    // Without a map: the compiled file's folder, dist/ left out.
    expect(moduleOf('file:///checkout/dist/bench/outbox-row-order.js', ROOT, sourceOf)).toBe('bench');
    expect(moduleOf('file:///elsewhere/lib/x.js', ROOT)).toBe('/elsewhere/lib');
  });
});

describe('the paired summary of allocations', () => {
  const site = (url: string, bytes: number, functionName = 'f') => ({ url, functionName, line: 3, bytes });
  /** A block of 100 answers: `total` bytes allocated, the sampled part split between pg and the package's flow folder. */
  const block = (pair: number, variant: string, total: number, pg: number, flow: number): AllocationBlock =>
    blockOf(
      pair,
      variant,
      { allocatedBytes: total * 100, collections: 2, sites: [site('file:///checkout/node_modules/pg/lib/query.js', pg * 100, 'Query'), ...(flow ? [site('file:///checkout/dist/src/idempotency/flow/run.js', flow * 100)] : [])] },
      100,
      ROOT,
    );
  const blocks = [
    block(1, 'bare', 200_000, 150_000, 0),
    block(1, 'first', 300_000, 160_000, 90_000),
    block(2, 'first', 310_000, 170_000, 100_000),
    block(2, 'bare', 190_000, 140_000, 0),
    block(3, 'bare', 200_000, 150_000, 0),
    block(3, 'first', 290_000, 150_000, 80_000),
    // A pair missing its other half is left out.
    block(4, 'first', 900_000, 0, 900_000),
  ];
  const summary = summariseAllocations(blocks, 'first', 'bare');

  it('counts bytes per answer, sampled by module and site', () => {
    expect(blocks[1]).toMatchObject({ bytesPerRequest: 300_000, sampledBytesPerRequest: 250_000, byModule: { 'node_modules/pg': 160_000, 'src/idempotency/flow': 90_000 } });
    expect(Object.keys(blocks[1].bySite)).toContain('node_modules/pg · Query (query.js:3)');
  });

  it('takes medians of the per-pair differences, the largest module first', () => {
    expect(summary.pairs).toBe(3);
    expect(summary.difference).toMatchObject({ median: 100_000, low: 90_000, high: 120_000, count: 3 });
    expect(summary.subjectBytes?.median).toBe(300_000);
    expect(summary.baseBytes?.median).toBe(200_000);
    expect(summary.sampledDifference?.median).toBe(100_000);
    expect(summary.modules.map((part) => [part.name, part.difference.median, part.subject, part.base])).toEqual([
      ['src/idempotency/flow', 90_000, 90_000, 0],
      ['node_modules/pg', 10_000, 160_000, 150_000],
    ]);
  });

  it('reads the target of +40 KB off the interval, then the median', () => {
    const spread = (median: number, high: number) => ({ median, q1: median, q3: median, low: median, high, confidence: 0.95, count: 9 });
    expect(targetVerdict(spread(30_000, 40_960))).toBe('met');
    expect(targetVerdict(spread(30_000, 50_000))).toBe('median only');
    expect(targetVerdict(spread(50_000, 60_000))).toBe('missed');
    expect(targetVerdict(undefined)).toBe('not measured');
    expect(targetVerdict(summary.difference)).toBe('missed');
  });

  it('prints the totals, the verdict and the top modules and sites', () => {
    const printed = formatAllocationReport(summary, 1);
    expect(printed).toMatch(/V8 heap, all collections counted\s+293\.0\s+195\.3\s+\+97\.7\s+\+87\.9 to \+117\.2/);
    expect(printed).toContain('Target: at most +40 KB per first execution over bare: missed.');
    expect(printed).toContain('src/idempotency/flow');
    expect(printed).not.toMatch(/^node_modules\/pg /m);
  });
});

describe('the allocation recorder', () => {
  it('counts what this process allocates between start and stop, freed objects included', async () => {
    const recorder = new AllocationRecorder();
    await recorder.start(1024);
    let kept = 0;
    // About 10 MB of short-lived arrays: most are collected before the stop.
    for (let i = 0; i < 100_000; i++) kept += new Array(12).fill(i).length;
    const recording = await recorder.stop();
    expect(kept).toBe(1_200_000);
    expect(recording.allocatedBytes).toBeGreaterThan(8_000_000);
    const sampled = recording.sites.reduce((total, one) => total + one.bytes, 0);
    expect(sampled / recording.allocatedBytes).toBeGreaterThan(0.8);
    expect(sampled / recording.allocatedBytes).toBeLessThan(1.25);
    await expect(recorder.stop()).rejects.toThrow('allocations: not recording');
  });

  it('flattens the profile’s tree into sites, one per function and line', () => {
    const frame = (functionName: string, lineNumber: number) => ({ functionName, url: 'file:///x.js', lineNumber });
    const leaf = { callFrame: frame('g', 4), selfSize: 10, children: [] };
    const head = { callFrame: frame('(root)', -1), selfSize: 0, children: [{ callFrame: frame('f', 1), selfSize: 5, children: [leaf] }, { callFrame: frame('h', 9), selfSize: 0, children: [{ ...leaf }] }] };
    expect(flatten(head).sort((a, b) => a.line - b.line)).toEqual([
      { url: 'file:///x.js', functionName: 'f', line: 2, bytes: 5 },
      { url: 'file:///x.js', functionName: 'g', line: 5, bytes: 20 },
    ]);
  });
});
