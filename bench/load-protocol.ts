import type { AllocationRecording } from './heap-allocations.js';

/**
 * Messages between the bench runner and its child processes (the bench
 * apps and the load generator), sent over the IPC channel of `fork()`.
 */

/** How the load generator picks the `Idempotency-Key` of each request. */
export type KeyPlan =
  /** A key never sent before, on every request. */
  | { mode: 'fresh'; prefix: string }
  /** Keys `prefix-0 … prefix-(poolSize-1)`, in turn, shared by all connections. */
  | { mode: 'cycle'; prefix: string; poolSize: number }
  /** Connections in groups of `burstSize`; the n-th request of every member of a group carries the same key. */
  | { mode: 'burst'; prefix: string; burstSize: number }
  /** A random UUID on every request: like clients' keys, they land all over the primary key index instead of at one end. */
  | { mode: 'random' };

/** One phase of load: a number of requests (`amount`) or a duration. */
export interface LoadPhase {
  name: 'prepare' | 'warm-up' | 'measure';
  connections: number;
  durationSeconds?: number;
  amount?: number;
  keys: KeyPlan;
}

/** What the runner asks the load generator to do for one scenario in one round. */
export interface LoadJob {
  url: string;
  body: string;
  phases: LoadPhase[];
}

/** Whether groups of duplicate requests really were in flight at the same time. */
export interface BurstOverlap {
  /** Keys whose every member got an answer. */
  completeGroups: number;
  /** Complete groups in which the last member was sent before the first answer came back. */
  overlappingGroups: number;
}

/** Where the open load of a paired run sends its requests: a path on the app, and how their keys are chosen. */
export interface LoadTarget {
  path: string;
  keys: KeyPlan;
}

/**
 * The numbers of one load phase, or of one stretch of the open load: a
 * window of a paired run, or the settling time before it.
 */
export interface PhaseResult {
  name: LoadPhase['name'] | 'settle' | 'window';
  durationSeconds: number;
  /** Completed responses, any status. */
  responses: number;
  requestsPerSecond: number;
  /** NaN without responses, which arrives as null over IPC (JSON): read them with `fixed()`. */
  latencyMs: { average: number; p50: number; p90: number; p99: number; max: number };
  statusCounts: Record<string, number>;
  non2xx: number;
  /** Connection errors, timeouts included. */
  errors: number;
  timeouts: number;
  /** 2xx responses with `Idempotent-Replayed: true`. */
  replayed2xx: number;
  /** 2xx responses without it. */
  fresh2xx: number;
  burst?: BurstOverlap;
}

/**
 * Runner to load generator: run this job; or, in a paired run, open
 * connections that keep sending until closed, aim them at another target,
 * and tally what they were answered since the last tally.
 */
export type LoadRequest =
  | { type: 'run'; job: LoadJob }
  | { type: 'open'; url: string; body: string; connections: number; target: LoadTarget }
  | { type: 'aim'; target: LoadTarget }
  | { type: 'tally'; name: PhaseResult['name'] }
  | { type: 'close' };
/** Load generator to runner: a job's phases (a tally is one), done for the other requests, or why it failed. */
export type LoadReply = { type: 'result'; phases: PhaseResult[] } | { type: 'done' } | { type: 'failed'; message: string };

/** Sent by the bench app once it listens. */
export interface AppReady {
  type: 'listening';
  port: number;
}

/** Runner to bench app: report your CPU time. */
export interface AppCpuRequest {
  type: 'cpu';
}

/** Bench app to runner: its CPU time so far (`process.cpuUsage()`, user + system), in µs. */
export interface AppCpu {
  type: 'cpu';
  micros: number;
}

/** Runner to bench app: start recording allocations (`bench:allocations`), sampling every `samplingInterval` bytes on average; or stop. */
export type AppAllocationsRequest = { type: 'allocations-start'; samplingInterval: number } | { type: 'allocations-stop' };

/** Bench app to runner: recording started, or what the stretch allocated (see heap-allocations.ts), or why it could not. */
export type AppAllocations =
  | { type: 'allocations-started' }
  | { type: 'allocations-recorded'; recording: AllocationRecording }
  | { type: 'allocations-failed'; message: string };
