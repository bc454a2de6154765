import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { AttemptLog } from './attempt-log.js';
import { FAULT_KINDS, type FaultWindow } from './faults.js';
import type { Observations } from './observations.js';
import { OPERATION_KINDS, type Operation } from './operations.js';
import type { InvariantResult } from './tally.js';

/** What the run was, for the report's header. */
export interface RunFacts {
  seed: number;
  durationSeconds: number;
  instances: number;
  workers: number;
  /** `replica-pair`: the failover run's primary and standby behind one endpoint. */
  database: 'embedded' | 'server' | 'replica-pair';
  /** Environment the instances ran with (lease, reaper, timeouts). */
  settings: Record<string, string>;
  startedAt: string;
  trafficMs: number;
  notes: string[];
}

/** The run's report: its facts, the traffic by kind, the faults, and each invariant. */
export interface ChaosReport extends RunFacts {
  passed: boolean;
  operations: Array<{ kind: string; operations: number; sends: number; attempts: number; answered: number; answeredOnVerify: number; skipped: number }>;
  attemptOutcomes: Record<string, number>;
  faults: Array<{ kind: string; count: number; totalMs: number }>;
  faultWindows: FaultWindow[];
  invariants: InvariantResult[];
  observations: Observations;
}

/** Tallies the traffic by kind, the attempts by outcome and the faults by kind, next to the invariants. */
export function buildReport(
  facts: RunFacts,
  operations: readonly Operation[],
  log: AttemptLog,
  windows: FaultWindow[],
  invariants: InvariantResult[],
  observations: Observations,
): ChaosReport {
  const attemptOutcomes: Record<string, number> = {};
  const byKind = OPERATION_KINDS.map((kind) => {
    const ops = operations.filter((op) => op.kind === kind);
    let attempts = 0;
    for (const op of ops) {
      for (const attempt of log.of(op.id)) {
        attempts++;
        const outcome = `${attempt.phase} ${attempt.status ?? attempt.error}`;
        attemptOutcomes[outcome] = (attemptOutcomes[outcome] ?? 0) + 1;
      }
    }
    const answered = (op: Operation, phase: string) => op.sends.some((send) => send.phase === phase && send.status === op.expectedStatus);
    return {
      kind,
      operations: ops.length,
      sends: ops.reduce((sum, op) => sum + op.sends.filter((send) => send.phase === 'traffic').length, 0),
      attempts,
      answered: ops.filter((op) => answered(op, 'traffic')).length,
      answeredOnVerify: ops.filter((op) => !op.skipped && !answered(op, 'traffic') && answered(op, 'verify')).length,
      skipped: ops.filter((op) => op.skipped).length,
    };
  });
  const faults = FAULT_KINDS.map((kind) => {
    const of = windows.filter((window) => window.kind === kind);
    return { kind, count: of.length, totalMs: of.reduce((sum, window) => sum + window.endedAt - window.startedAt, 0) };
  });
  const passed = invariants.every((invariant) => invariant.violations === 0);
  return { ...facts, passed, operations: byKind, attemptOutcomes, faults, faultWindows: windows, invariants, observations };
}

/** The tables a person reads at the end of the run. */
export function formatReport(report: ChaosReport): string {
  const lines = [
    `seed ${report.seed}, ${report.trafficMs / 1000} s of traffic, ${report.instances} instances, ${report.workers} workers, ${report.database} PostgreSQL`,
    ...report.notes.map((note) => `note: ${note}`),
    '',
    table(
      ['operation kind', 'operations', 'sends', 'attempts', 'answered', 'on re-send', 'skipped'],
      [
        ...report.operations.map((row) => [row.kind, row.operations, row.sends, row.attempts, row.answered, row.answeredOnVerify, row.skipped]),
        ['total', ...(['operations', 'sends', 'attempts', 'answered', 'answeredOnVerify', 'skipped'] as const).map((k) => report.operations.reduce((s, r) => s + r[k], 0))],
      ],
    ),
    '',
    table(['fault', 'injected', 'total ms'], report.faults.map((row) => [row.kind, row.count, row.totalMs])),
    '',
    table(['invariant', 'violations'], report.invariants.map((row) => [row.name, row.violations])),
  ];
  for (const invariant of report.invariants.filter((row) => row.violations > 0)) {
    lines.push('', `${invariant.name}: ${invariant.violations} violation(s), e.g.`, ...invariant.examples.map((example) => `  - ${example}`));
  }
  const misleading = Object.entries(report.observations.finalErrorsThatSucceeded);
  if (misleading.length) {
    const counts = misleading.map(([kind, count]) => `${count} ${kind}`).join(', ');
    lines.push('', `observed (not an invariant): operations told a final 5xx whose work was nonetheless done: ${counts}`);
  }
  lines.push('', report.passed ? 'PASSED: no invariant was violated' : 'FAILED: see the violations above');
  return lines.join('\n');
}

/** Writes the report as JSON, creating the folder if needed. */
export async function writeReport(path: string, report: ChaosReport): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, `${JSON.stringify(report, null, 2)}\n`);
}

function table(header: string[], rows: Array<Array<string | number>>): string {
  const cells = [header, ...rows.map((row) => row.map(String))];
  const widths = header.map((_, column) => Math.max(...cells.map((row) => row[column].length)));
  const render = (row: string[]) => row.map((cell, column) => (column === 0 ? cell.padEnd(widths[column]) : cell.padStart(widths[column]))).join('  ');
  return [render(header), widths.map((width) => '-'.repeat(width)).join('  '), ...cells.slice(1).map(render)].join('\n');
}
