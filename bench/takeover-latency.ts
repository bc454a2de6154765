import { setTimeout as sleep } from 'node:timers/promises';
import { commandLineOrExit, valueFlag, wholeNumber } from '../harness/command-line.js';
import { createScratchDatabase, withClient } from '../src/demo/database/scratch-database.js';
import { sharedTempDir, startEmbeddedPostgres } from '../src/demo/database/embedded-postgres.js';
import { startFakePaymentProvider } from '../src/demo/payment-provider/fake-payment-provider.js';
import { chargesOf, createOrder, setFault } from '../test/support/demo.js';
import { startDemoProcess } from '../test/support/demo-process.js';

/**
 * How long a phased payment stays unfinished after its owner dies between the
 * external charge and the final commit: until a retrying client gets its 201,
 * and, with no client, until the reaper of a surviving instance completes it.
 * `npm run bench:takeover [-- flags]`; `--help` lists them.
 */
const COMMAND_LINE = {
  command: 'npm run bench:takeover --',
  flags: {
    trials: valueFlag({ placeholder: '<n>', description: 'trials of each ending (a retrying client, the reaper)', default: '5', parse: wholeNumber() }),
    lease: valueFlag({ placeholder: '<ms>', description: 'the lease of the phased payment', default: '2000', parse: wholeNumber() }),
    reaper: valueFlag({ placeholder: '<ms>', description: 'reaper interval of the surviving instance', default: '1000', parse: wholeNumber() }),
  },
  footer: 'PostgreSQL: DATABASE_URL if set, else an embedded server started for the run.',
};
const values = commandLineOrExit(COMMAND_LINE);
const { trials, lease: leaseMs, reaper: reaperMs } = values;

const embedded = process.env.DATABASE_URL ? undefined : await startEmbeddedPostgres({ dataDir: sharedTempDir('takeover-data', String(process.pid)) });
const database = await createScratchDatabase(process.env.DATABASE_URL ?? embedded!.url, 'idempotency_takeover');
const provider = await startFakePaymentProvider();
const env = { DATABASE_URL: database.url, PAYMENT_PROVIDER_URL: provider.url, PAYMENT_PROVIDER_TIMEOUT_MS: '60000', IDEMPOTENCY_LEASE_MS: String(leaseMs), REAPER_INTERVAL_MS: String(reaperMs) };
const pay = (url: string, orderId: string, key: string, amountCents: number) =>
  fetch(`${url}/orders/${orderId}/payments`, {
    method: 'POST',
    headers: { authorization: 'Bearer demo-key-acme', 'idempotency-key': key, 'content-type': 'application/json' },
    body: JSON.stringify({ amountCents, currency: 'EUR' }),
  });

const survivor = await startDemoProcess(env);
const byClient: number[] = [];
const byReaper: number[] = [];
try {
  for (let trial = 0; trial < trials * 2; trial++) {
    const viaClient = trial % 2 === 0;
    const victim = await startDemoProcess({ ...env, REAPER_INTERVAL_MS: '0' });
    const amount = 5000 + trial;
    const orderId = await createOrder(victim.url, `takeover-${trial}`);
    await setFault(provider.url, amount, 'charge-then-hang');
    const key = `takeover-${trial}`;
    void pay(victim.url, orderId, key, amount).catch(() => undefined);
    while ((await chargesOf(provider.url, amount)).length === 0) await sleep(5);
    await victim.kill();
    const diedAt = performance.now();
    if (viaClient) {
      while ((await pay(survivor.url, orderId, key, amount)).status !== 201) await sleep(50);
      byClient.push(performance.now() - diedAt);
    } else {
      const status = () => withClient(database.url, async (c) => (await c.query(`SELECT status FROM idempotency_records WHERE key = $1`, [key])).rows[0]?.status);
      while ((await status()) !== 'completed') await sleep(20);
      byReaper.push(performance.now() - diedAt);
    }
    if ((await chargesOf(provider.url, amount)).length !== 1) throw new Error(`trial ${trial}: the provider charged more than once`);
  }
} finally {
  await survivor.stop();
  await provider.close();
  await database.drop();
  await embedded?.stop();
}

const summary = (label: string, samples: number[]) => {
  const sorted = [...samples].sort((a, b) => a - b);
  console.log(`${label.padEnd(34)} median ${Math.round(sorted[Math.floor(sorted.length / 2)])} ms, max ${Math.round(sorted[sorted.length - 1])} ms (${sorted.length} trials)`);
};
console.log(`lease ${leaseMs} ms, reaper interval ${reaperMs} ms; one provider charge per trial, checked`);
summary('owner killed → retrying client 201', byClient);
summary('owner killed → reaper completes it', byReaper);
