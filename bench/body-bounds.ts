import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { commandLineOrExit, valueFlag, wholeNumber } from '../harness/command-line.js';
import { createScratchDatabase } from '../src/demo/database/scratch-database.js';
import { sharedTempDir, startEmbeddedPostgres } from '../src/demo/database/embedded-postgres.js';
import { startDemoProcess } from '../test/support/demo-process.js';

/**
 * What a body no parser reads costs everyone else: `GET /health` on the demo
 * (Express) while clients send it bodies of the largest size the module
 * reads (`maxBodyBytes`, set here through IDEMPOTENCY_MAX_BODY_BYTES), as
 * JSON of a type Express's JSON parser skips (the demo takes JSON types
 * only), against the same probe on an idle demo; and the demo's peak memory.
 * The senders run on a worker thread of their own, so that sending does not
 * delay the probe. `npm run bench:bodies [-- flags]`; `--help` lists them.
 */
interface SenderData {
  url: string;
  bound: number;
  senders: number;
}

if (isMainThread) await measure();
else await sendUntilTold(workerData as SenderData);

/** The senders' thread: each sender posts a body of `bound` bytes, one after another, until the main thread says stop. */
async function sendUntilTold({ url, bound, senders }: SenderData): Promise<void> {
  const body = Buffer.from(`{"sku":"${'x'.repeat(bound - 25)}","quantity":1}`.padEnd(bound, ' '));
  let stop = false;
  parentPort!.once('message', () => (stop = true));
  const statuses: Record<number, number> = {};
  await Promise.all(
    Array.from({ length: senders }, async (_, sender) => {
      for (let n = 0; !stop; n++) {
        const headers = { authorization: 'Bearer demo-key-acme', 'idempotency-key': `bodies-${sender}-${n}`, 'content-type': 'application/vnd.x+json' };
        const response = await fetch(`${url}/orders`, { method: 'POST', headers, body });
        await response.arrayBuffer();
        statuses[response.status] = (statuses[response.status] ?? 0) + 1;
      }
    }),
  );
  parentPort!.postMessage(statuses);
}

async function measure(): Promise<void> {
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

  /** Probes /health every 20 ms for `ms`: each answer's latency. */
  const probe = async (ms: number): Promise<number[]> => {
    const latencies: number[] = [];
    for (const until = performance.now() + ms; performance.now() < until; await sleep(20)) {
      const start = performance.now();
      await (await fetch(`${demo.url}/health`)).arrayBuffer();
      latencies.push(performance.now() - start);
    }
    return latencies;
  };
  const peakMemoryMiB = async () => Number(/VmHWM:\s+(\d+) kB/.exec(await readFile(`/proc/${demo.child.pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024;
  const percentile = (samples: number[], p: number) => [...samples].sort((a, b) => a - b)[Math.min(samples.length - 1, Math.floor(samples.length * p))];
  const line = (label: string, samples: number[]) =>
    `${label.padEnd(32)} p50 ${percentile(samples, 0.5).toFixed(1)} ms, p99 ${percentile(samples, 0.99).toFixed(1)} ms, max ${Math.max(...samples).toFixed(1)} ms (${samples.length} probes)`;

  try {
    const idle = await probe(seconds * 1000);
    const idleMemory = await peakMemoryMiB();
    const worker = new Worker(new URL(import.meta.url), { workerData: { url: demo.url, bound, senders } satisfies SenderData });
    const answered = new Promise<Record<number, number>>((resolve, reject) => worker.once('message', resolve).once('error', reject));
    const loaded = await probe(seconds * 1000);
    worker.postMessage('stop');
    const statuses = await answered;
    console.log(`bodies of ${mib} MiB (the bound), ${senders} senders, ${seconds} s per phase; answers: ${Object.entries(statuses).map(([status, n]) => `${n} × ${status}`).join(', ')}`);
    console.log(line('GET /health, idle', idle));
    console.log(line('GET /health, beside the bodies', loaded));
    console.log(`demo peak memory: ${idleMemory.toFixed(0)} MiB idle, ${(await peakMemoryMiB()).toFixed(0)} MiB after the bodies`);
    await worker.terminate();
  } finally {
    await demo.stop();
    await database.drop();
    await embedded?.stop();
  }
}
