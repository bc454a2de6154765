/**
 * `npm run chaos:failover`: the demo app's instances and workers on a
 * PostgreSQL primary with a streaming standby, through one HAProxy endpoint,
 * under the chaos run's retried traffic; mid-way the primary is killed
 * (kill -9), the standby promoted and the endpoint moved to it. Then the
 * chaos run's invariants are checked, and the failover's figures printed.
 * Synchronous replication must pass (exit 1 otherwise); the asynchronous run
 * measures what is lost and exits 0 unless the harness failed. See
 * chaos/README.md.
 */
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { CleanupStack } from '../harness/cleanup-stack.js';
import { parseCommandLine, usageOf } from '../harness/command-line.js';
import { HaproxyEndpoint } from '../harness/haproxy-endpoint.js';
import { ReplicaPair } from '../harness/replica-pair.js';
import { freePort } from '../src/demo/database/embedded-postgres.js';
import { createScratchDatabase } from '../src/demo/database/scratch-database.js';
import { startFakePaymentProvider } from '../src/demo/payment-provider/fake-payment-provider.js';
import { AttemptLog } from './attempt-log.js';
import { DemoCluster } from './cluster.js';
import type { DatabaseReader } from './database.js';
import { CHAOS_STREAM, checkDelivery, settleDelivery } from './delivery.js';
import { failoverFigures, formatFigures } from './failover-figures.js';
import { FAILOVER_COMMAND_LINE, type FailoverOptions, failoverOptions } from './failover-options.js';
import type { FaultWindow } from './faults.js';
import { DELIVERY_SETTLE_TIMEOUT_MS, GRACE_MS, INSTANCE_SETTINGS, SETTLE_MS, VERIFY_CONCURRENCY } from './instance-settings.js';
import { checkInvariants } from './invariants.js';
import { ChaosNats } from './nats-server.js';
import { observe } from './observations.js';
import { ProviderControl } from './provider-control.js';
import { SeededRandom } from './random.js';
import { buildReport, formatReport, writeReport } from './report.js';
import { inProgressClaims, takeSnapshot } from './snapshot.js';
import { Traffic } from './traffic.js';
import { WorkerPool } from './workers.js';

/** This file runs from dist/chaos/; results go to the source folder's chaos/results/. */
const RESULTS_DIR = fileURLToPath(new URL('../../chaos/results/', import.meta.url));

const log = (line: string) => console.log(`[failover] ${line}`);

interface Running {
  pair?: ReplicaPair;
  endpoint?: HaproxyEndpoint;
  cluster?: DemoCluster;
  workers?: WorkerPool;
}

async function main(): Promise<number> {
  const usage = usageOf(FAILOVER_COMMAND_LINE);
  let options: FailoverOptions;
  try {
    const values = parseCommandLine(FAILOVER_COMMAND_LINE, process.argv.slice(2));
    if (values === 'help') {
      console.log(usage);
      return 0;
    }
    options = failoverOptions(values);
  } catch (error) {
    console.error(`${error instanceof Error ? error.message : String(error)}\n\n${usage}`);
    return 2;
  }
  const cleanup = new CleanupStack(log);
  const running: Running = {};
  let interrupted = false;
  const interrupt = (signal: NodeJS.Signals) => {
    if (interrupted) return;
    interrupted = true;
    log(`${signal}: stopping the instances, the workers, the endpoint and the servers`);
    running.cluster?.killAllNow();
    running.workers?.killAllNow();
    running.endpoint?.stopNow();
    running.pair?.stopNow();
    void cleanup.run().finally(() => process.exit(130));
  };
  process.on('SIGINT', interrupt);
  process.on('SIGTERM', interrupt);
  try {
    return await runFailover(options, cleanup, running);
  } catch (error) {
    if (!interrupted) console.error('[failover] setup or harness error:', error);
    return 1;
  } finally {
    await cleanup.run();
  }
}

async function runFailover(options: FailoverOptions, cleanup: CleanupStack, running: Running): Promise<number> {
  log(`seed ${options.seed}, ${options.replication} replication, replication stalled ${options.stallMs} ms before the kill, ${options.durationSeconds} s, ${options.instances} instances, ${options.workers} workers`);
  const startedAt = new Date().toISOString();
  const pair = await ReplicaPair.start({ primaryPort: await freePort(), standbyPort: await freePort(), replication: options.replication, log });
  running.pair = pair;
  cleanup.add('primary and standby', () => pair.stop());
  const endpoint = await HaproxyEndpoint.start({ port: await freePort(), servers: { primary: pair.primary.port, standby: pair.standby.port }, active: 'primary' });
  running.endpoint = endpoint;
  cleanup.add('haproxy', () => endpoint.stop());
  // Created on the primary (the standby replays it), reached through the endpoint from then on; the folder goes with the pair.
  const scratchUrl = (await createScratchDatabase(pair.primary.url(), 'failover')).url;
  const name = new URL(scratchUrl).pathname.slice(1);
  const url = endpoint.url(scratchUrl);
  log(`database ${name} through haproxy on port ${endpoint.port}: primary ${pair.primary.port}, standby ${pair.standby.port}`);
  const pool = new pg.Pool({ connectionString: url, max: 3 });
  // Its idle connections die with the primary; the next query opens one to wherever the endpoint points.
  pool.on('error', () => undefined);
  cleanup.add('harness pool', () => pool.end());
  const database: DatabaseReader = { query: async <T>(sql: string, params?: unknown[]) => (await pool.query(sql, params)).rows as T[] };

  const fakeProvider = await startFakePaymentProvider();
  cleanup.add('payment provider', () => fakeProvider.close());
  const provider = new ProviderControl(fakeProvider.url);
  const nats = await ChaosNats.start();
  if (nats) cleanup.add('nats-server', () => nats.close());
  const delivery = nats ? { NATS_URL: nats.url, ...CHAOS_STREAM, OUTBOX_RELAY: 'off', FULFILMENT_CONSUMER: 'off' } : {};
  const env = { ...INSTANCE_SETTINGS, ...delivery, DATABASE_URL: url, PAYMENT_PROVIDER_URL: provider.url };
  log(`starting ${options.instances} instances (logs in chaos/results/failover-instances.log)`);
  const cluster = await DemoCluster.start(options.instances, env, join(RESULTS_DIR, 'failover-instances.log'));
  running.cluster = cluster;
  cleanup.add('instances', () => cluster.stopAll());
  const workers = new WorkerPool({ ...env, DB_POOL_SIZE: '4' }, join(RESULTS_DIR, 'failover-workers.log'));
  running.workers = workers;
  cleanup.add('workers', () => workers.stopAll());
  if (nats) {
    // No crash faults of their own: the failover is this run's fault, and every worker must carry on through it.
    workers.add('relay', { OUTBOX_RELAY: 'on', FULFILMENT_CONSUMER: 'off' });
    workers.add('consumer', { OUTBOX_RELAY: 'off', FULFILMENT_CONSUMER: 'on' });
  } else {
    log(`no ${ChaosNats.binary}: delivery is left out of this run`);
  }
  const attemptLog = new AttemptLog(cluster.urls, join(RESULTS_DIR, 'failover-attempts.jsonl'));
  cleanup.add('attempt log', () => attemptLog.close());

  const random = new SeededRandom(options.seed);
  const traffic = new Traffic(cluster.urls, provider, attemptLog, options.seed.toString(36));
  const start = Date.now();
  const until = start + options.durationSeconds * 1000;
  const windows: FaultWindow[] = [];
  let failover: { killAt: number; failedOverAt: number } | undefined;
  const failingOver = (async () => {
    await sleep(Math.max(0, options.durationSeconds * 1000 * options.failoverAt - options.stallMs));
    if (options.stallMs > 0) {
      await pair.stallReplication();
      await sleep(options.stallMs);
    }
    const killAt = Date.now();
    await pair.killPrimary();
    await pair.promoteStandby();
    await endpoint.repoint('standby');
    failover = { killAt, failedOverAt: Date.now() };
    windows.push({ kind: 'failover', startedAt: killAt, endedAt: failover.failedOverAt, detail: `primary killed, standby promoted, endpoint moved in ${failover.failedOverAt - killAt} ms` });
    log(`failover: primary killed, standby promoted, endpoint moved in ${failover.failedOverAt - killAt} ms`);
  })();
  log('traffic');
  await Promise.all([traffic.run({ workers: options.workers, running: () => Date.now() < until, maxScenarios: options.durationSeconds * 500 }, random.fork()), failingOver]);
  const trafficMs = Date.now() - start;

  await traffic.clearProviderFaults();
  log(`traffic over after ${trafficMs} ms (${traffic.operations.length} operations); waiting ${SETTLE_MS} ms for leases to lapse and the reapers to finish abandoned claims`);
  await sleep(SETTLE_MS);
  const inProgress = await inProgressClaims(database);
  log('re-sending every operation once to check its answer');
  await traffic.verify(VERIFY_CONCURRENCY, random.fork());
  const snapshot = await takeSnapshot(database, provider);
  const notes = [`${options.replication} replication; the failover at ${Math.round(options.failoverAt * 100)}% of the traffic, after replication stalled for ${options.stallMs} ms`];
  let deliveryInvariants: Awaited<ReturnType<typeof checkDelivery>> = [];
  if (nats) {
    const settled = await settleDelivery(database, DELIVERY_SETTLE_TIMEOUT_MS);
    notes.push(`delivery ${settled.settled ? 'settled' : 'did NOT settle'} ${settled.settleMs} ms after the traffic: ${settled.events} outbox events, ${settled.shipments} shipments`);
    deliveryInvariants = await checkDelivery(database, nats.url, workers);
  }
  const invariants = checkInvariants({
    operations: traffic.operations,
    log: attemptLog,
    snapshot,
    inProgress,
    unexpectedExits: cluster.unexpectedExits,
    // The failover, and the lease and reaper pass after it, excuse a 5xx: a connection lost mid-request answers 503.
    inFault: (from, to) => windows.some((window) => from <= window.endedAt + GRACE_MS && to >= window.startedAt),
    instanceOf: (pid) => cluster.instanceWithPid(pid),
  }).concat(deliveryInvariants);
  const figures = failoverFigures(traffic.operations, attemptLog, snapshot, invariants, failover!.killAt, failover!.failedOverAt);
  const facts = { seed: options.seed, durationSeconds: options.durationSeconds, instances: options.instances, workers: options.workers, database: 'replica-pair' as const, settings: INSTANCE_SETTINGS, startedAt, trafficMs, notes };
  const report = { ...buildReport(facts, traffic.operations, attemptLog, windows, invariants, observe(traffic.operations, attemptLog)), replication: options.replication, figures };
  console.log(`\n${formatReport(report)}\n\n${formatFigures(figures)}\n`);
  const file = `failover-${options.replication}.json`;
  await writeReport(join(RESULTS_DIR, file), report);
  log(`report written to chaos/results/${file}`);
  if (options.replication === 'asynchronous') {
    log('asynchronous replication: a measurement, not a pass or fail (exit 0)');
    return 0;
  }
  return report.passed ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error('[failover]', error);
    process.exit(1);
  },
);
