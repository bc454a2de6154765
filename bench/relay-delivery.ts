import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { commandLineOrExit, positiveNumber, valueFlag, wholeNumber } from '../harness/command-line.js';
import { createScratchDatabase, withClient } from '../src/demo/database/scratch-database.js';
import { sharedTempDir, startEmbeddedPostgres } from '../src/demo/database/embedded-postgres.js';
import { ChaosNats } from '../chaos/nats-server.js';
import { startDemoProcess } from '../test/support/demo-process.js';

/**
 * `npm run bench:relay [-- flags]` (`--help` lists them):
 * 1. relay throughput: `--events` pending order.created events, then one
 *    relay process (the demo worker, relay only) publishing them to JetStream
 *    with an ack each: events per second until none is pending;
 * 2. end-to-end lag under first-execution load: `--connections` clients
 *    creating orders for `--duration` seconds against the demo (relay and
 *    consumer in its process), then the lag from each order's commit (its
 *    outbox row, written just before the commit) to its shipment's commit
 *    (the shipment row, written just before the consumer's commit), p50/p99.
 * PostgreSQL: DATABASE_URL, else embedded. NATS: a private nats-server
 * (NATS_SERVER_BINARY, else nats-server on PATH), else NATS_URL.
 */
const values = commandLineOrExit({
  command: 'npm run bench:relay --',
  flags: {
    events: valueFlag({ placeholder: '<n>', description: 'pending events the relay publishes (2000 at most for one ordering key)', default: '20000', parse: wholeNumber() }),
    duration: valueFlag({ placeholder: '<s>', description: 'seconds of first-execution load for the end-to-end lag', default: '20', parse: positiveNumber() }),
    connections: valueFlag({ placeholder: '<n>', description: 'concurrent clients creating orders', default: '16', parse: wholeNumber() }),
  },
  footer: 'PostgreSQL: DATABASE_URL, else embedded. NATS: a private nats-server, else NATS_URL.',
});
const { events, duration: durationS, connections } = values;
const WORKER = fileURLToPath(new URL('../src/demo/worker.js', import.meta.url));

const embedded = process.env.DATABASE_URL ? undefined : await startEmbeddedPostgres({ dataDir: sharedTempDir('relay-bench-data', String(process.pid)) });
const serverUrl = process.env.DATABASE_URL ?? embedded!.url;
const nats = await ChaosNats.start();
const natsUrl = nats?.url ?? process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const run = Date.now().toString(36);
const delivery = { NATS_URL: natsUrl, NATS_STREAM: `BENCH_${run}`.toUpperCase(), NATS_SUBJECT_PREFIX: `bench_${run}`, NATS_DURABLE: `bench_${run}`, TENANT_RATE_LIMIT: '0', REAPER_INTERVAL_MS: '0' };
const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))];

try {
  // 1. Relay throughput: distinct ordering keys (publishes in parallel), then one hot key (one at a time, each after the previous ack).
  for (const [label, keys] of [['distinct keys', events], ['one ordering key', 1]] as const) {
    const count = keys === 1 ? Math.min(events, 2000) : events;
    const first = await createScratchDatabase(serverUrl, 'idempotency_relay_bench');
    try {
      const migrator = await startDemoProcess({ ...delivery, DATABASE_URL: first.url, OUTBOX_RELAY: 'off', FULFILMENT_CONSUMER: 'off' });
      await migrator.stop();
      await withClient(first.url, (client) =>
        client.query(
          `INSERT INTO idempotency_outbox (id, type, payload, ordering_key)
           SELECT gen_random_uuid(), 'order.created',
                  jsonb_build_object('id', gen_random_uuid(), 'tenant', 'acme', 'sku', 'book-' || n, 'quantity', 1, 'note', null, 'status', 'created', 'createdAt', now()),
                  'order-' || (n % $2::int)
             FROM generate_series(1, $1::int) AS n`,
          [count, keys],
        ),
      );
      const relay = spawn(process.execPath, [WORKER], { env: { ...process.env, ...delivery, DATABASE_URL: first.url, FULFILMENT_CONSUMER: 'off', NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'ignore'] });
      // From the relay's start line, so that the process start is not counted.
      await new Promise<void>((resolve) => relay.stdout!.on('data', (chunk: Buffer) => chunk.toString().includes('Worker running') && resolve()));
      const started = performance.now();
      const pending = () => withClient(first.url, async (client) => Number((await client.query(`SELECT count(*) AS n FROM idempotency_outbox WHERE status = 'pending'`)).rows[0].n));
      while ((await pending()) > 0) await sleep(20);
      const seconds = (performance.now() - started) / 1000;
      relay.kill('SIGTERM');
      await once(relay, 'exit');
      console.log(`relay throughput, ${label}: ${count} events in ${seconds.toFixed(2)} s = ${Math.round(count / seconds)} events/s (one relay, batches of 100, every publish acked by JetStream)`);
    } finally {
      await first.drop();
    }
  }

  // 2. End-to-end lag under first-execution load.
  const second = await createScratchDatabase(serverUrl, 'idempotency_relay_bench');
  try {
    const demo = await startDemoProcess({ ...delivery, NATS_STREAM: `${delivery.NATS_STREAM}_E2E`, NATS_SUBJECT_PREFIX: `${delivery.NATS_SUBJECT_PREFIX}_e2e`, DATABASE_URL: second.url });
    let created = 0;
    let failed = 0;
    const until = Date.now() + durationS * 1000;
    await Promise.all(
      Array.from({ length: connections }, async (_, client) => {
        for (let i = 0; Date.now() < until; i++) {
          const response = await fetch(`${demo.url}/orders`, {
            method: 'POST',
            headers: { authorization: 'Bearer demo-key-acme', 'idempotency-key': `bench-${run}-${client}-${i}`, 'content-type': 'application/json' },
            body: JSON.stringify({ sku: `bench-${client}-${i}`, quantity: 1 }),
          });
          await response.arrayBuffer();
          if (response.status === 201) created++;
          else failed++;
        }
      }),
    );
    const unshipped = () => withClient(second.url, async (client) => Number((await client.query(`SELECT count(*) AS n FROM orders o WHERE NOT EXISTS (SELECT 1 FROM shipments s WHERE s.order_id = o.id)`)).rows[0].n));
    const drainStarted = Date.now();
    while ((await unshipped()) > 0 && Date.now() - drainStarted < 120_000) await sleep(100);
    const lags = await withClient(second.url, async (client) =>
      (
        await client.query(
          `SELECT extract(epoch FROM s.created_at - e.created_at) * 1000 AS ms
             FROM idempotency_outbox e JOIN shipments s ON s.order_id = e.ordering_key::uuid WHERE e.type = 'order.created'`,
        )
      ).rows.map((row: { ms: string }) => Number(row.ms)),
    );
    await demo.stop();
    const sorted = lags.sort((a, b) => a - b);
    console.log(
      `end-to-end lag (order commit → shipment commit) under ${connections} clients of first executions for ${durationS} s: ` +
        `${created} orders (${Math.round(created / durationS)}/s, ${failed} not 201), ${sorted.length} shipped; ` +
        `p50 ${percentile(sorted, 50).toFixed(1)} ms, p99 ${percentile(sorted, 99).toFixed(1)} ms, max ${sorted[sorted.length - 1].toFixed(1)} ms`,
    );
  } finally {
    await second.drop();
  }
} finally {
  await nats?.close();
  await embedded?.stop();
}
