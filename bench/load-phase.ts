import autocannon from 'autocannon';
import type { LoadPhase, PhaseResult } from './load-protocol.js';
import { KeyedClients } from './request-keys.js';

/** Seconds before autocannon counts a request as timed out: well above the module's 1 s wait. */
export const REQUEST_TIMEOUT_SECONDS = 10;

/** Every bench request is the same POST of a JSON body; only its path and key differ. */
export const REQUEST_HEADERS = { 'content-type': 'application/json' };

let running: autocannon.Instance | undefined;

/** Runs one phase of load against `url` with autocannon and summarises it. */
export async function runPhase(url: string, body: string, phase: LoadPhase): Promise<PhaseResult> {
  const clients = new KeyedClients(phase.keys, phase.connections);
  let instance: autocannon.Instance | undefined;
  const finished = new Promise<autocannon.Result>((resolve, reject) => {
    instance = autocannon(
      {
        url,
        method: 'POST',
        headers: REQUEST_HEADERS,
        body,
        connections: phase.connections,
        ...(phase.amount !== undefined ? { amount: phase.amount } : { duration: phase.durationSeconds ?? 1 }),
        timeout: REQUEST_TIMEOUT_SECONDS,
        setupClient: clients.setupClient,
      },
      (error, result) => (error ? reject(error) : resolve(result)),
    );
  });
  running = instance;
  try {
    const result = await finished;
    const tally = clients.takeTally();
    const durationSeconds = result.duration;
    return {
      name: phase.name,
      durationSeconds,
      ...tally,
      requestsPerSecond: durationSeconds > 0 ? tally.responses / durationSeconds : 0,
      errors: result.errors,
      timeouts: result.timeouts,
      burst: clients.burstOverlap(),
    };
  } finally {
    running = undefined;
  }
}

/** Stops the phase in progress, if any: its promise then settles with what it measured so far. */
export function stopRunningPhase(): void {
  running?.stop();
}
