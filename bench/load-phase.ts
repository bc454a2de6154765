import autocannon from 'autocannon';
import type { LoadPhase, PhaseResult } from './load-protocol.js';
import { KeyedClients } from './request-keys.js';

/** Seconds before autocannon counts a request as timed out: well above the module's 1 s wait. */
const REQUEST_TIMEOUT_SECONDS = 10;

let running: autocannon.Instance | undefined;

/** Runs one phase of load against `url` with autocannon and summarises it. */
export async function runPhase(url: string, body: string, phase: LoadPhase): Promise<PhaseResult> {
  const clients = new KeyedClients(phase.keys, phase.connections);
  const instance = autocannon({
    url,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
    connections: phase.connections,
    ...(phase.amount !== undefined ? { amount: phase.amount } : { duration: phase.durationSeconds ?? 1 }),
    timeout: REQUEST_TIMEOUT_SECONDS,
    setupClient: clients.setupClient,
  });
  running = instance;
  try {
    const result = await instance;
    return summarise(phase, result, clients);
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
  for (const [status, { count }] of Object.entries(result.statusCodeStats)) statusCounts[status] = count;
  const responses = result.requests.total;
  return {
    name: phase.name,
    durationSeconds: result.duration,
    responses,
    requestsPerSecond: result.duration > 0 ? responses / result.duration : 0,
    latencyMs: latencySummary(clients.latenciesMs),
    statusCounts,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    replayed2xx: clients.replayed2xx,
    fresh2xx: clients.fresh2xx,
    burst: clients.burstOverlap(),
  };
}

/** Nearest-rank percentiles, rounded to a microsecond. */
function latencySummary(latencies: number[]): PhaseResult['latencyMs'] {
  const sorted = Float64Array.from(latencies).sort();
  const at = (percent: number) => (sorted.length ? round3(sorted[Math.max(0, Math.ceil((percent / 100) * sorted.length) - 1)]) : NaN);
  const total = sorted.reduce((sum, value) => sum + value, 0);
  return { average: sorted.length ? round3(total / sorted.length) : NaN, p50: at(50), p90: at(90), p99: at(99), max: at(100) };
}

function round3(value: number): number {
  return Math.round(value * 1000) / 1000;
}
