import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DatabaseReader } from './database.js';
import type { FaultWindow } from './faults.js';
import type { ChaosNats } from './nats-server.js';
import type { SeededRandom } from './random.js';
import { type InvariantResult, Tally } from './tally.js';
import type { WorkerPool } from './workers.js';

/** The demo's stream and subjects in a chaos run. */
export const CHAOS_STREAM = { NATS_STREAM: 'CHAOS_EVENTS', NATS_SUBJECT_PREFIX: 'chaos', NATS_DURABLE: 'fulfilment' };
/** How often a worker crashes itself at its uncovered point: per publish ack (relay), per commit (consumer). */
export const CRASH_PROBABILITY = { publish: 0.01, commit: 0.01 };

/** What the delivery side of a run settled on. */
export interface DeliveryOutcome {
  /** From the end of traffic until nothing was pending. */
  settleMs: number;
  settled: boolean;
  events: number;
  shipments: number;
}

/**
 * Restarts the run's NATS server once, in the middle of the run, and
 * records the workers' own crashes as fault windows.
 */
export async function restartNatsOnce(nats: ChaosNats, random: SeededRandom, startMs: number, untilMs: number, windows: FaultWindow[], log: (line: string) => void): Promise<void> {
  const at = startMs + (untilMs - startMs) * (0.4 + 0.2 * random.next());
  await sleep(Math.max(0, at - Date.now()));
  const pauseMs = random.int(500, 2000);
  const startedAt = Date.now();
  await nats.restart(pauseMs);
  const window = { kind: 'restart-nats' as const, startedAt, endedAt: Date.now(), detail: `down ${pauseMs} ms` };
  windows.push(window);
  log(`fault restart-nats: ${window.detail} (${window.endedAt - startedAt} ms)`);
}

/** The workers' injected crashes, as fault windows of their kind. */
export function workerCrashWindows(workers: WorkerPool): FaultWindow[] {
  return workers.exits
    .filter((exit) => exit.fault)
    .map((exit) => ({ kind: exit.fault === 'after publish' ? ('crash-after-publish' as const) : ('crash-after-commit' as const), startedAt: exit.at, endedAt: exit.at, detail: `${exit.role} worker` }));
}

/** Waits until no event is pending and every order has its shipment, or the timeout. */
export async function settleDelivery(database: DatabaseReader, timeoutMs: number): Promise<DeliveryOutcome> {
  const started = Date.now();
  for (;;) {
    const [state] = await database.query<{ pending: number; unshipped: number; events: number; shipments: number }>(
      `SELECT (SELECT count(*)::int FROM idempotency_outbox WHERE status = 'pending') AS pending,
              (SELECT count(*)::int FROM orders o WHERE NOT EXISTS (SELECT 1 FROM shipments s WHERE s.order_id = o.id)) AS unshipped,
              (SELECT count(*)::int FROM idempotency_outbox) AS events,
              (SELECT count(*)::int FROM shipments) AS shipments`,
    );
    const settled = state.pending === 0 && state.unshipped === 0;
    if (settled || Date.now() - started > timeoutMs) return { settleMs: Date.now() - started, settled, events: state.events, shipments: state.shipments };
    await sleep(250);
  }
}

/** The delivery invariants, from the database and the stream. */
export async function checkDelivery(database: DatabaseReader, natsUrl: string, workers: WorkerPool): Promise<InvariantResult[]> {
  const shipped = new Tally('one shipment per committed order', 'once the system settles, every committed order has exactly one shipment');
  const orphans = new Tally('no shipment without its order', 'every shipment belongs to a committed order of the same tenant');
  const lost = new Tally('no event lost', 'every outbox event was published (status sent, none pending or dead) and its message id is in the stream');
  const crashes = new Tally('no worker exits on its own', 'a relay or consumer worker ends only through an injected crash or the harness');

  for (const row of await database.query<{ id: string; shipments: number }>(
    `SELECT o.id, count(s.id)::int AS shipments FROM orders o LEFT JOIN shipments s ON s.order_id = o.id GROUP BY o.id HAVING count(s.id) <> 1`,
  )) {
    shipped.fail(`order ${row.id}: ${row.shipments} shipments`);
  }
  for (const row of await database.query<{ id: string; order_id: string }>(
    `SELECT s.id, s.order_id FROM shipments s LEFT JOIN orders o ON o.id = s.order_id AND o.tenant = s.tenant WHERE o.id IS NULL`,
  )) {
    orphans.fail(`shipment ${row.id} of order ${row.order_id}`);
  }
  const events = await database.query<{ id: string; type: string; status: string; attempts: number }>(`SELECT id, type, status, attempts FROM idempotency_outbox`);
  for (const event of events.filter((event) => event.status !== 'sent')) lost.fail(`event ${event.id} (${event.type}) is ${event.status} after ${event.attempts} attempts`);
  const inStream = await streamMessageIds(natsUrl, CHAOS_STREAM.NATS_STREAM);
  for (const event of events.filter((event) => event.status === 'sent' && !inStream.has(event.id))) lost.fail(`event ${event.id} (${event.type}) is marked sent but not in the stream`);
  for (const exit of workers.exits.filter((exit) => !exit.fault && !exit.whileStarting)) {
    crashes.fail(`${exit.role} worker exited (code ${exit.code}, signal ${exit.signal}) at ${new Date(exit.at).toISOString()}: ${exit.tail.slice(-5).join(' | ')}`);
  }
  return [shipped.done, orphans.done, lost.done, crashes.done];
}

/** Every `Nats-Msg-Id` in the stream, read message by message. */
async function streamMessageIds(natsUrl: string, stream: string): Promise<Set<string>> {
  const connection = await connect({ servers: natsUrl });
  try {
    const manager = await jetstreamManager(connection);
    const { first_seq, last_seq } = (await manager.streams.info(stream)).state;
    const ids = new Set<string>();
    const sequences = Array.from({ length: Math.max(0, last_seq - first_seq + 1) }, (_, i) => first_seq + i);
    for (let i = 0; i < sequences.length; i += 64) {
      const batch = await Promise.all(sequences.slice(i, i + 64).map((seq) => manager.streams.getMessage(stream, { seq }).catch(() => null)));
      for (const message of batch) {
        const id = message?.header?.get('Nats-Msg-Id');
        if (id) ids.add(id);
      }
    }
    return ids;
  } finally {
    await connection.close();
  }
}
