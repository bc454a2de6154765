import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { commandLineOrExit, valueFlag, wholeNumber } from '../harness/command-line.js';
import { createScratchDatabase } from '../src/demo/database/scratch-database.js';
import { sharedTempDir, startEmbeddedPostgres } from '../src/demo/database/embedded-postgres.js';
import { startDemoProcess } from '../test/support/demo-process.js';

/**
 * What a body no parser reads costs everyone else: `GET /health` on the demo
 * (Express) while clients send it bodies of the largest size the module
 * reads (`maxBodyBytes`, set here through IDEMPOTENCY_MAX_BODY_BYTES), as
 * JSON of a type Express's JSON parser skips, as bytes and as one multipart
 * field, against the same probe on an idle demo. And the demo's peak memory.
 * `npm run bench:bodies [-- flags]`; `--help` lists them.
 */
const COMMAND_LINE = {
  command: 'npm run bench:bodies --',
  flags: {
    mib: valueFlag({ placeholder: '<MiB>', description: 'the bound, and the size of each body', default: '16', parse: wholeNumber() }),
    senders: valueFlag({ placeholder: '<n>', description: 'clients sending such bodies at once, one after another', default: '4', parse: wholeNumber() }),
    seconds: valueFlag({ placeholder: '<s>', description: 'length of each phase (idle, then loaded)', default: '10', parse: wholeNumber() }),
  },
  footer: 'PostgreSQL: DATABASE_URL if set, else an embedded server started for the run.',
};
const { mib, senders, seconds } = commandLineOrExit(COMMAND_LINE);
const bound = mib * 1024 * 1024;

const embedded = process.env.DATABASE_URL ? undefined : await startEmbeddedPostgres({ dataDir: sharedTempDir('bodies-data', String(process.pid)) });
const database = await createScratchDatabase(process.env.DATABASE_URL ?? embedded!.url, 'idempotency_bodies');
const demo = await startDemoProcess({ DATABASE_URL: database.url, IDEMPOTENCY_MAX_BODY_BYTES: String(bound), TENANT_RATE_LIMIT: '0', REAPER_INTERVAL_MS: '0', PAYMENT_PROVIDER_URL: 'http://127.0.0.1:9' });

/** The bodies, each exactly `bound` bytes: the largest the module reads. */
const boundary = 'bench-boundary';
const head = `--${boundary}\r\nContent-Disposition: form-data; name="note"\r\n\r\n`;
const tail = `\r\n--${boundary}--\r\n`;
const bodies = [
  { type: 'application/vnd.x+json', bytes: Buffer.from(`{"sku":"${'x'.repeat(bound - 20)}","q":1}`.padEnd(bound, ' ')) },
  { type: 'application/octet-stream', bytes: Buffer.alloc(bound, 7) },
  { type: `multipart/form-data; boundary=${boundary}`, bytes: Buffer.from(head + 'y'.repeat(bound - head.length - tail.length) + tail) },
];

/** Probes /health every 20 ms for `ms`: each answer's latency. */
async function probe(ms: number): Promise<number[]> {
  const latencies: number[] = [];
  const until = performance.now() + ms;
  while (performance.now() < until) {
    const start = performance.now();
    await (await fetch(`${demo.url}/health`)).arrayBuffer();
    latencies.push(performance.now() - start);
    await sleep(20);
  }
  return latencies;
}

const statuses = new Map<number, number>();
let stop = false;
async function send(sender: number): Promise<void> {
  for (let n = sender; !stop; n++) {
    const { type, bytes } = bodies[n % bodies.length];
    const response = await fetch(`${demo.url}/orders`, { method: 'POST', headers: { authorization: 'Bearer demo-key-acme', 'idempotency-key': `bodies-${sender}-${n}`, 'content-type': type }, body: bytes });
    await response.arrayBuffer();
    statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
  }
}

const peakMemoryMiB = async () => Number(/VmHWM:\s+(\d+) kB/.exec(await readFile(`/proc/${demo.child.pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024;
const percentile = (samples: number[], p: number) => [...samples].sort((a, b) => a - b)[Math.min(samples.length - 1, Math.floor(samples.length * p))];
const line = (label: string, samples: number[]) =>
  `${label.padEnd(44)} p50 ${percentile(samples, 0.5).toFixed(1)} ms, p99 ${percentile(samples, 0.99).toFixed(1)} ms, max ${Math.max(...samples).toFixed(1)} ms (${samples.length} probes)`;

try {
  const idle = await probe(seconds * 1000);
  const idleMemory = await peakMemoryMiB();
  const sending = Array.from({ length: senders }, (_, sender) => send(sender));
  const loaded = await probe(seconds * 1000);
  stop = true;
  await Promise.all(sending);
  console.log(`bodies of ${mib} MiB (the bound), ${senders} senders, ${seconds} s per phase; answers: ${[...statuses].map(([status, n]) => `${n} × ${status}`).join(', ')}`);
  console.log(line('GET /health, idle', idle));
  console.log(line('GET /health, beside the bodies', loaded));
  console.log(`demo peak memory: ${idleMemory.toFixed(0)} MiB idle, ${(await peakMemoryMiB()).toFixed(0)} MiB after the bodies`);
} finally {
  await demo.stop();
  await database.drop();
  await embedded?.stop();
}
