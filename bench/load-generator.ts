/**
 * The load generator process, forked by the bench runner so that autocannon
 * does not share an event loop with the runner. It runs one job at a time,
 * received over IPC, and answers with the numbers of each phase; or, for a
 * paired run, holds one open load that the runner aims and tallies.
 */
import { aimLoad, closeLoad, openLoad, tallyLoad } from './open-load.js';
import { runPhase, stopRunningPhase } from './load-phase.js';
import type { LoadReply, LoadRequest, PhaseResult } from './load-protocol.js';

function reply(message: LoadReply): void {
  process.send?.(message);
}

async function answer(message: LoadRequest): Promise<LoadReply> {
  switch (message.type) {
    case 'run': {
      const phases: PhaseResult[] = [];
      for (const phase of message.job.phases) phases.push(await runPhase(message.job.url, message.job.body, phase));
      return { type: 'result', phases };
    }
    case 'open':
      openLoad(message.url, message.body, message.connections, message.target);
      return { type: 'done' };
    case 'aim':
      aimLoad(message.target);
      return { type: 'done' };
    case 'tally':
      return { type: 'result', phases: [tallyLoad(message.name)] };
    case 'close':
      await closeLoad();
      return { type: 'done' };
  }
}

process.on('message', (message: LoadRequest) => {
  if (!message?.type) return;
  answer(message).then(reply, (error: unknown) => reply({ type: 'failed', message: error instanceof Error ? (error.stack ?? error.message) : String(error) }));
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
