/**
 * Phased operations (`nest-idempotency/phases`): `IdempotencyPhasesModule`
 * serves `@Idempotent({ phases: true })` routes; a route's operation is a
 * `PhasedOperation`, run through `@PhasedClaim()`, its phases local
 * (transactions of their own) or external (a call with a downstream key).
 * An app that imports only the core entry point loads none of it.
 *
 * @module nest-idempotency/phases
 */
export { IdempotencyPhasesModule } from './idempotency-phases.module.js';
export { PhasedOperation, type OperationResponse } from './phased-operation.js';
export { PhasedClaim } from './phased-claim.js';
export { type Phases, type RunId, LeaseLostError, downstreamKey } from './phases.js';
export { AbandonedClaimsCompleter, type CompleterBounds, type CompleterPass } from './abandoned-claims.completer.js';
