import type { CleanupStack } from '../harness/cleanup-stack.js';
import type { PeerOptions } from './peer-orders.controller.js';
import { deleteRedisKeys, redisAnswers } from './redis-commands.js';

/**
 * The peer's settings when a run loads it (`needed`), it is not turned off
 * (`peer`) and a Redis server answers; its keys carry the run's id and are
 * removed at cleanup. Otherwise undefined, with a note saying why.
 */
export async function peerFor(
  options: { peer: boolean; redisUrl: string },
  needed: boolean,
  runId: string,
  cleanup: CleanupStack,
  notes: string[],
  log: (line: string) => void,
): Promise<PeerOptions | undefined> {
  if (!options.peer || !needed) {
    if (!options.peer) notes.push('The peer (@node-idempotency/nestjs) was skipped: --no-peer.');
    return undefined;
  }
  if (!(await redisAnswers(options.redisUrl))) {
    const note = `The peer (@node-idempotency/nestjs) was skipped: no Redis server answers at ${options.redisUrl}.`;
    notes.push(note);
    log(note);
    return undefined;
  }
  const keyPrefix = `idempotency-bench:${runId}`;
  cleanup.add('peer keys', async () => log(`removed ${await deleteRedisKeys(options.redisUrl, `${keyPrefix}:*`)} peer keys from Redis`));
  notes.push('The peer records its outcome in Redis after the business transaction committed, so its record and the order are not atomic; the bench measures cost, not guarantees.');
  return { redisUrl: options.redisUrl, keyPrefix };
}
