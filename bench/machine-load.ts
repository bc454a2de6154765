import { cpus } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { round2 } from './results-file.js';

/** Above this share of the CPUs already busy before a run starts, its figures are suspect. */
const BUSY_SHARE_WARNING = 0.2;
/** How long the machine is watched before a run. */
const SAMPLE_MS = 3000;

/**
 * The share of the machine's CPU time spent on other work over `ms`, taken
 * before a run starts anything of its own. The load average answers too late
 * for this: it still counts a run that ended a minute ago, and misses work
 * that started a few seconds before.
 */
async function busyShareOver(ms: number): Promise<number> {
  const before = totalTimes();
  await sleep(ms);
  const after = totalTimes();
  const total = after.total - before.total;
  return total > 0 ? round2((after.busy - before.busy) / total) : 0;
}

/** How busy the machine was before a run: measured over `SAMPLE_MS`, with a warning (logged now, and for the results' notes) where it was busy. */
export async function machineBeforeRun(log: (line: string) => void): Promise<{ busyShare: number; warning?: string }> {
  const busyShare = await busyShareOver(SAMPLE_MS);
  if (busyShare <= BUSY_SHARE_WARNING) return { busyShare };
  const warning = `Other work used ${Math.round(busyShare * 100)}% of the ${cpus().length} CPUs just before this run started: its figures are suspect; rerun on a quiet machine.`;
  log(`warning: ${warning}`);
  return { busyShare, warning };
}

function totalTimes(): { busy: number; total: number } {
  let busy = 0;
  let total = 0;
  for (const { times } of cpus()) {
    const all = times.user + times.nice + times.sys + times.irq + times.idle;
    busy += all - times.idle;
    total += all;
  }
  return { busy, total };
}
