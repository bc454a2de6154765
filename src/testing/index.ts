/**
 * The testing kit: prove in your own e2e tests that a route is idempotent,
 * and give each suite a migrated database of its own. Needs no test
 * framework: failures throw `AssertionError`s.
 *
 * @module nest-idempotency/testing
 */
export {
  assertIdempotentRoute,
  type IdempotencyCheckName,
  type IdempotencyCheckResult,
  type IdempotentRouteCheck,
  type IdempotentRouteReport,
} from './assert-idempotent-route.js';
export type { ListeningApp } from './route-probe.js';
export { createScratchDatabase, type ScratchDatabase, type ScratchDatabaseOptions } from './scratch-database.js';
