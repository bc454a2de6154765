import { type CommandLine, type CommandLineValues, type Flag, fileName, list, valueFlag, wholeNumber } from '../harness/command-line.js';

/** The handler shapes `--shape` takes: each a bare route and the same handler behind `@Idempotent()`. */
export const ALLOCATION_SHAPES = {
  harness: { label: 'order + outbox row through IdempotencyTransactionHost.manager (the outside harness)', bare: '/bench/outbox-row/bare', first: '/bench/outbox-row/idempotent' },
  orders: { label: "the demo's order + Outbox.add()", bare: '/bench/orders/bare', first: '/bench/orders/idempotent' },
  'two-rows': { label: 'order + shipment through IdempotencyTransactionHost.manager', bare: '/bench/two-rows/bare', first: '/bench/two-rows/idempotent' },
  // Not the module: the bare order behind a pass-through interceptor, what any interceptor-based layer (the peer too) pays Nest's chain.
  interceptor: { label: "the demo's bare order behind a pass-through interceptor (Nest's chain alone)", bare: '/bench/orders/bare', first: '/bench/orders/intercepted' },
} as const;

export type AllocationShape = keyof typeof ALLOCATION_SHAPES;

/** `--shape`'s value: one or more shapes, comma-separated, each once. */
export function shapeList(value: string, name: string): AllocationShape[] {
  const shapes = list(value);
  const unknown = shapes.filter((shape) => !Object.hasOwn(ALLOCATION_SHAPES, shape));
  if (shapes.length === 0 || unknown.length) throw new Error(`--${name} takes ${Object.keys(ALLOCATION_SHAPES).join(', ')} (comma-separated), got "${value}"`);
  return [...new Set(shapes)] as AllocationShape[];
}

/** The flags of `npm run bench:allocations`; each default is written here once. */
export const ALLOCATIONS_COMMAND_LINE = {
  command: 'npm run bench:allocations --',
  flags: {
    shape: valueFlag({ placeholder: '<names>', description: `handler shapes, comma-separated: ${Object.keys(ALLOCATION_SHAPES).join(', ')}`, default: 'harness', parse: shapeList }),
    pairs: valueFlag({ placeholder: '<n>', description: 'pairs of blocks per shape, bare and first, every other pair in reverse', default: '10', parse: wholeNumber() }),
    requests: valueFlag({ placeholder: '<n>', description: 'requests per block, each with a fresh key', default: '400', parse: wholeNumber() }),
    warmup: valueFlag({ placeholder: '<n>', description: 'unrecorded requests on each route before the first block', default: '400', parse: wholeNumber(0) }),
    connections: valueFlag({ placeholder: '<n>', description: 'concurrent connections of each block', default: '32', parse: wholeNumber() }),
    pool: valueFlag({ placeholder: '<n>', description: "connections in the bench app's pool", default: '10', parse: wholeNumber() }),
    'sampling-interval': valueFlag({ placeholder: '<bytes>', description: "the heap profiler's mean bytes between samples", default: '4096', parse: wholeNumber(64) }),
    top: valueFlag({ placeholder: '<n>', description: 'modules and sites of the difference to print', default: '15', parse: wholeNumber() }),
    'results-name': valueFlag({ placeholder: '<name>', description: 'write bench/results/<name>.json', default: 'allocations', parse: fileName }),
  },
  footer: 'PostgreSQL: DATABASE_URL if set, else an embedded server started for the run. See bench/README.md.',
} satisfies CommandLine<Record<string, Flag<unknown>>>;

/** The settings of one allocations run. */
export interface AllocationOptions {
  shapes: AllocationShape[];
  pairs: number;
  requests: number;
  warmupRequests: number;
  connections: number;
  poolSize: number;
  samplingInterval: number;
  top: number;
  resultsName: string;
}

export function allocationOptions(values: CommandLineValues<typeof ALLOCATIONS_COMMAND_LINE.flags>): AllocationOptions {
  return {
    shapes: values.shape,
    pairs: values.pairs,
    requests: values.requests,
    warmupRequests: values.warmup,
    connections: values.connections,
    poolSize: values.pool,
    samplingInterval: values['sampling-interval'],
    top: values.top,
    resultsName: values['results-name'],
  };
}

/** Which variant runs first in a pair: bare in odd pairs, first in even ones, so neither order is favoured. */
export function blockOrder(pair: number): ['bare', 'first'] | ['first', 'bare'] {
  return pair % 2 === 1 ? ['bare', 'first'] : ['first', 'bare'];
}
