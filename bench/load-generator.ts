/**
 * The load generator process, forked by the bench runner so that autocannon
 * does not share an event loop with the runner. It runs one job at a time,
 * received over IPC, and answers with the numbers of each phase.
 */
import { runPhase, stopRunningPhase } from './load-phase.js';
import type { LoadReply, LoadRequest, PhaseResult } from './load-protocol.js';

function reply(message: LoadReply): void {
  process.send?.(message);
}

process.on('message', (message: LoadRequest) => {
  if (message?.type !== 'run') return;
  void (async () => {
    try {
      const phases: PhaseResult[] = [];
      for (const phase of message.job.phases) phases.push(await runPhase(message.job.url, message.job.body, phase));
      reply({ type: 'result', phases });
    } catch (error) {
      reply({ type: 'failed', message: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    }
  })();
});

// The runner ends this process with SIGTERM; Ctrl-C reaches the whole process
// group; a runner that died closes the IPC channel. Each stops the load.
const shutdown = () => {
  stopRunningPhase();
  process.exit(0);
};
process.once('SIGTERM', shutdown);
process.once('SIGINT', shutdown);
process.once('disconnect', shutdown);
