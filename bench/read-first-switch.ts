import type { INestApplication } from '@nestjs/common';
// The bench's one import of an internal: no option turns the read-first path off (see bench/README.md).
import { ReplayLikelihood } from '../src/idempotency/replay-likelihood.js';

/**
 * Makes the module never judge a replay likely, so that every replay the
 * cache does not answer goes through the claim (which finds the key held and
 * rolls back) instead of a read by primary key first: the path a claim-first
 * module would always take. Only for the scenario that measures the
 * difference; every other app keeps the adaptive path.
 */
export function turnReadFirstOff(app: INestApplication): void {
  const likelihood = app.get(ReplayLikelihood, { strict: false });
  likelihood.likely = () => false;
}
