import autocannon from 'autocannon';
import type { LoadPhase, PhaseResult } from './load-protocol.js';
import { KeyedClients } from './request-keys.js';

/** Seconds before autocannon counts a request as timed out: well above the module's 1 s wait. */
const REQUEST_TIMEOUT_SECONDS = 10;

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
        headers: { 'content-type': 'application/json' },
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
    return summarise(phase, await finished, clients);
  } finally {
    running = undefined;
  }
}

/** Stops the phase in progress, if any: its promise then settles with what it measured so far. */
export function stopRunningPhase(): void {
  running?.stop();
}

function summarise(phase: LoadPhase, result: autocannon.Result, clients: KeyedClients): PhaseResult {
  const statusCounts: Record<string, number> = {};
  for (const [status, { count }] of Object.entries(result.statusCodeStats ?? {})) statusCounts[status] = count ?? 0;
  const responses = result.requests.total;
  return {
    name: phase.name,
    durationSeconds: result.duration,
    responses,
    requestsPerSecond: result.duration > 0 ? responses / result.duration : 0,
    latencyMs: latencySummary(clients.latencyMicros),
    statusCounts,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    replayed2xx: clients.replayed2xx,
    fresh2xx: clients.fresh2xx,
    burst: clients.burstOverlap(),
  };
}

/** Percentiles from the phase's HDR histogram (3 significant digits), in milliseconds. */
function latencySummary(histogram: KeyedClients['latencyMicros']): PhaseResult['latencyMs'] {
  if (histogram.totalCount === 0) return { average: NaN, p50: NaN, p90: NaN, p99: NaN, max: NaN };
  const ms = (micros: number) => micros / 1000;
  return {
    average: Math.round(histogram.mean) / 1000,
    p50: ms(histogram.getValueAtPercentile(50)),
    p90: ms(histogram.getValueAtPercentile(90)),
    p99: ms(histogram.getValueAtPercentile(99)),
    max: ms(histogram.maxValue),
  };
}
