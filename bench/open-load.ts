import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import type { LoadTarget, PhaseResult } from './load-protocol.js';
import { REQUEST_HEADERS, REQUEST_TIMEOUT_SECONDS } from './load-phase.js';
import { KeyedClients } from './request-keys.js';

/** Longer than any run: the load stops when the runner closes it. */
const UNTIL_CLOSED_SECONDS = 24 * 60 * 60;

/** autocannon's message for a request that timed out; any other request error is a connection error. */
const TIMED_OUT = 'request timed out';

/** The load of a paired run, open from `open` to `close`. */
interface OpenLoad {
  instance: autocannon.Instance;
  clients: KeyedClients;
  /** Settles when autocannon has stopped and closed its connections. */
  finished: Promise<void>;
  errors: number;
  timeouts: number;
  /** When the current tally started (`performance.now()`). */
  since: number;
}

let load: OpenLoad | undefined;

/**
 * Opens `connections` to the app, each sending its next request as soon as
 * the last one is answered, until `closeLoad()`. The connections stay open
 * while `aimLoad()` changes what they send, so no window of a paired run
 * pays for new connections or cold sockets.
 */
export function openLoad(url: string, body: string, connections: number, target: LoadTarget): void {
  if (load) throw new Error('the load is already open');
  const clients = new KeyedClients(target.keys, connections, target.path);
  let instance: autocannon.Instance | undefined;
  const finished = new Promise<void>((resolve, reject) => {
    instance = autocannon(
      { url, method: 'POST', headers: REQUEST_HEADERS, body, connections, duration: UNTIL_CLOSED_SECONDS, timeout: REQUEST_TIMEOUT_SECONDS, setupClient: clients.setupClient },
      (error) => (error ? reject(error) : resolve()),
    );
  });
  const opened: OpenLoad = { instance: instance!, clients, finished, errors: 0, timeouts: 0, since: performance.now() };
  opened.instance.on('reqError', (error: Error) => {
    opened.errors++;
    if (error.message === TIMED_OUT) opened.timeouts++;
  });
  load = opened;
}

/** Requests built from now on go to `target`. */
export function aimLoad(target: LoadTarget): void {
  openedLoad().clients.aim(target);
}

/** What the connections were answered since the last tally (or the opening), which then starts again. */
export function tallyLoad(name: PhaseResult['name']): PhaseResult {
  const opened = openedLoad();
  const now = performance.now();
  const durationSeconds = (now - opened.since) / 1000;
  const tally = opened.clients.takeTally();
  const result: PhaseResult = {
    name,
    durationSeconds,
    ...tally,
    requestsPerSecond: durationSeconds > 0 ? tally.responses / durationSeconds : 0,
    errors: opened.errors,
    timeouts: opened.timeouts,
  };
  opened.since = now;
  opened.errors = opened.timeouts = 0;
  return result;
}

/** Stops the load and waits until its connections are closed; nothing when none is open. */
export async function closeLoad(): Promise<void> {
  const opened = load;
  load = undefined;
  if (!opened) return;
  opened.instance.stop();
  await opened.finished;
}

function openedLoad(): OpenLoad {
  if (!load) throw new Error('no load is open');
  return load;
}
