import { relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AllocationRecording, AllocationSite } from './heap-allocations.js';
import { type Spread, spreadOf } from './paired-statistics.js';
import { fixed, table } from './report-table.js';

/** The source file a compiled script was built from (its source map's), or undefined where it has none. */
export type SourceResolver = (path: string) => string | undefined;

/** Frames V8 gives no script for: builtins (`Array.prototype.map`, `JSON.parse`), the API, the collector. */
export const NATIVE = '(V8 builtins and native)';

/**
 * The module an allocation site belongs to: `node_modules/<package>` (the
 * innermost, scoped names whole), a folder of the checkout (`dist/…` read
 * through its source map, so the package's code shows as `src/idempotency/<folder>`),
 * a part of Node's own library (`node:internal/streams`, `node:_http_server`),
 * or V8's builtins.
 */
export function moduleOf(url: string, root: string, sourceOf?: SourceResolver): string {
  if (!url) return NATIVE;
  if (url.startsWith('node:')) {
    const parts = url.slice('node:'.length).split('/');
    return `node:${parts[0] === 'internal' && parts.length > 2 ? parts.slice(0, 2).join('/') : parts.join('/')}`;
  }
  const path = url.startsWith('file://') ? fileURLToPath(url) : url;
  const normalised = path.split(sep).join('/');
  const inModules = normalised.lastIndexOf('/node_modules/');
  if (inModules >= 0) {
    const [scope, name] = normalised.slice(inModules + '/node_modules/'.length).split('/');
    return `node_modules/${scope.startsWith('@') && name ? `${scope}/${name}` : scope}`;
  }
  const source = (sourceOf?.(path) ?? path).split(sep).join('/');
  const inCheckout = relative(root, source).split(sep).join('/');
  if (inCheckout.startsWith('..') || inCheckout.startsWith('/')) return source.slice(0, source.lastIndexOf('/')) || source;
  const withoutDist = inCheckout.startsWith('dist/') ? inCheckout.slice('dist/'.length) : inCheckout;
  const folder = withoutDist.slice(0, withoutDist.lastIndexOf('/'));
  return folder || withoutDist;
}

/** A site's name in the report: its function, file and line, under its module. */
export function siteName(site: AllocationSite, module: string): string {
  const file = site.url ? site.url.slice(site.url.lastIndexOf('/') + 1) : '';
  return `${module} · ${site.functionName || '(anonymous)'}${file ? ` (${file}:${site.line})` : ''}`;
}

/** One block of requests of one variant: what the app allocated, per 2xx answer. */
export interface AllocationBlock {
  /** Its pair, from 1. */
  pair: number;
  variant: string;
  answers: number;
  /** V8 heap bytes allocated per answer (the GC-based total). */
  bytesPerRequest: number;
  /** The sampled profile's sum per answer: an estimate of the same, from the samples. */
  sampledBytesPerRequest: number;
  garbageCollections: number;
  /** Sampled bytes per answer, by module. */
  byModule: Record<string, number>;
  /** Sampled bytes per answer, by site (`siteName`). */
  bySite: Record<string, number>;
}

/** A block from the app's recording of it and the 2xx answers it gave. */
export function blockOf(pair: number, variant: string, recording: AllocationRecording, answers: number, root: string, sourceOf?: SourceResolver): AllocationBlock {
  const byModule: Record<string, number> = {};
  const bySite: Record<string, number> = {};
  let sampled = 0;
  for (const site of recording.sites) {
    const module = moduleOf(site.url, root, sourceOf);
    const name = siteName(site, module);
    byModule[module] = (byModule[module] ?? 0) + site.bytes / answers;
    bySite[name] = (bySite[name] ?? 0) + site.bytes / answers;
    sampled += site.bytes;
  }
  return {
    pair,
    variant,
    answers,
    bytesPerRequest: recording.allocatedBytes / answers,
    sampledBytesPerRequest: sampled / answers,
    garbageCollections: recording.collections,
    byModule,
    bySite,
  };
}

/** One part (a module or a site) of the difference: the median over pairs of subject − base bytes per request, and each side's median. */
export interface PartDifference {
  name: string;
  difference: Spread;
  subject: number;
  base: number;
}

/** The run's summary: each variant's bytes per request, and the subject − base difference, over pairs, total and by part. */
export interface AllocationSummary {
  subject: string;
  base: string;
  pairs: number;
  subjectBytes?: Spread;
  baseBytes?: Spread;
  /** Subject − base bytes per request, pair by pair (the GC-based totals). */
  difference?: Spread;
  /** The same from the sampled profiles' sums: it should agree with `difference` within the sampling's error. */
  sampledDifference?: Spread;
  /** Every module, largest median difference first. */
  modules: PartDifference[];
  /** Every site, largest median difference first. */
  sites: PartDifference[];
}

/**
 * Pairs up the blocks (one of each variant per pair number; pairs missing
 * either are left out) and summarises them: medians of the per-pair
 * differences with the paired method's 95% interval (`spreadOf`).
 */
export function summariseAllocations(blocks: readonly AllocationBlock[], subject: string, base: string): AllocationSummary {
  const pairs = [...new Set(blocks.map((block) => block.pair))].flatMap((pair) => {
    const of = (variant: string) => blocks.find((block) => block.pair === pair && block.variant === variant);
    const [one, other] = [of(subject), of(base)];
    return one && other ? [{ subject: one, base: other }] : [];
  });
  const parts = (read: (block: AllocationBlock) => Record<string, number>): PartDifference[] => {
    const names = new Set(pairs.flatMap((pair) => [...Object.keys(read(pair.subject)), ...Object.keys(read(pair.base))]));
    const median = (values: number[]) => spreadOf(values)?.median ?? 0;
    return [...names]
      .map((name) => ({
        name,
        difference: spreadOf(pairs.map((pair) => (read(pair.subject)[name] ?? 0) - (read(pair.base)[name] ?? 0)))!,
        subject: median(pairs.map((pair) => read(pair.subject)[name] ?? 0)),
        base: median(pairs.map((pair) => read(pair.base)[name] ?? 0)),
      }))
      .sort((a, b) => b.difference.median - a.difference.median);
  };
  return {
    subject,
    base,
    pairs: pairs.length,
    subjectBytes: spreadOf(pairs.map((pair) => pair.subject.bytesPerRequest)),
    baseBytes: spreadOf(pairs.map((pair) => pair.base.bytesPerRequest)),
    difference: spreadOf(pairs.map((pair) => pair.subject.bytesPerRequest - pair.base.bytesPerRequest)),
    sampledDifference: spreadOf(pairs.map((pair) => pair.subject.sampledBytesPerRequest - pair.base.sampledBytesPerRequest)),
    modules: parts((block) => block.byModule),
    sites: parts((block) => block.bySite),
  };
}

/** The issue's target: a first execution allocates at most this many bytes more than the bare transaction. */
export const TARGET_EXTRA_BYTES = 40 * 1024;

/** Whether a run meets the target: by its interval, by its median only, or not. */
export function targetVerdict(difference: Spread | undefined, target = TARGET_EXTRA_BYTES): 'met' | 'median only' | 'missed' | 'not measured' {
  if (!difference) return 'not measured';
  if (difference.high <= target) return 'met';
  return difference.median <= target ? 'median only' : 'missed';
}

/** The printed report: totals, then the `top` modules and sites of the difference. */
export function formatAllocationReport(summary: AllocationSummary, top: number): string {
  const kb = (bytes: number | undefined) => (bytes === undefined || !Number.isFinite(bytes) ? '-' : fixed(bytes / 1024, 1));
  const signedKb = (bytes: number) => `${bytes >= 0 ? '+' : ''}${fixed(bytes / 1024, 1)}`;
  const range = (spread: Spread | undefined) => (spread ? `${signedKb(spread.low)} to ${signedKb(spread.high)}` : '-');
  const totals = table(
    ['measure', `${summary.subject} KB/req`, `${summary.base} KB/req`, 'difference KB/req', '95% interval'],
    [
      ['V8 heap, all collections counted', kb(summary.subjectBytes?.median), kb(summary.baseBytes?.median), summary.difference ? signedKb(summary.difference.median) : '-', range(summary.difference)],
      ['sampled profile', '', '', summary.sampledDifference ? signedKb(summary.sampledDifference.median) : '-', range(summary.sampledDifference)],
    ],
  );
  const rows = (parts: readonly PartDifference[]) =>
    parts.slice(0, top).map((part) => [part.name, signedKb(part.difference.median), range(part.difference), kb(part.subject), kb(part.base)]);
  const header = (what: string) => [what, 'difference KB/req', '95% interval', `${summary.subject}`, `${summary.base}`];
  const verdict = targetVerdict(summary.difference);
  const few = (summary.difference?.confidence ?? 1) < 0.95 ? " With fewer than 6 pairs the interval is the pairs' range and holds the median less often." : '';
  return [
    `Allocations per request, ${summary.subject} − ${summary.base}: medians over ${summary.pairs} pairs of blocks, with the 95% interval of the median.${few}`,
    totals,
    `Target: at most +${TARGET_EXTRA_BYTES / 1024} KB per first execution over bare: ${verdict}.`,
    '',
    `Top ${top} modules of the difference (sampled; KB per request)`,
    table(header('module'), rows(summary.modules)),
    '',
    `Top ${top} sites of the difference (sampled; KB per request)`,
    table(header('site'), rows(summary.sites)),
  ].join('\n');
}
