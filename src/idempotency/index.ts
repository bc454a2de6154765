export { Idempotent, SkipIdempotency } from './idempotent.decorator.js';
export { IdempotencyModule } from './idempotency.module.js';
export { IDEMPOTENCY_MODULE_OPTIONS } from './idempotency.module-definition.js';
export type { IdempotencyModuleOptions, IdempotentOptions, StoreErrorIf } from './idempotency.options.js';
export type { FingerprintFields } from './request-fingerprint.js';
export { TransactionClosedError, TransactionHost } from './transaction-host.js';
export { IdempotencyRecord, type IdempotencyRecordStatus } from './idempotency-record.entity.js';
export { idempotencyMigrations } from '../../migrations/index.js';
export { REPLAYED_HEADER } from './recorded-outcome.js';
export { IdempotencyGraphqlError, type IdempotencyGraphqlErrorExtensions } from './graphql/graphql-errors.js';
export { idempotencyExtensionOf, type IdempotencyResponseExtension } from './graphql/graphql-replays.js';
export { idempotencyApolloPlugin, idempotencyMercuriusHooks, type IdempotencyApolloPlugin, type IdempotencyMercuriusHooks } from './graphql/graphql-plugins.js';
export { IdempotencyReaper, type ReapResult } from './idempotency.reaper.js';
export {
  IdempotencyEvents,
  type IdempotencyEvent,
  type IdempotencyEventListener,
  type AttemptEvent,
  type AttemptOutcome,
  type CommitFailedEvent,
  type ReapedEvent,
  type LeaseExpiredEvent,
  type AttemptTimeline,
  type StepTiming,
} from './events/idempotency-events.js';
export { IDEMPOTENCY_CHANNELS } from './events/idempotency-channels.js';
export type { ReaperOptions } from './idempotency.options.js';
export { PhasedOperation, type OperationResponse } from './phases/phased-operation.js';
export { PhasedClaim } from './phases/phased-claim.js';
export { type Phases, type RunId, LeaseLostError, downstreamKey } from './phases/phases.js';
export { AbandonedClaimsCompleter, type CompleterBounds, type CompleterPass } from './phases/abandoned-claims.completer.js';
export {
  IdempotencyConfigurationError,
  IdempotencyDatabaseUnavailableException,
  IdempotencyKeyMalformedException,
  IdempotencyKeyMissingException,
  IdempotencyKeyReusedException,
  IdempotencyOperationUnfinishedException,
  IdempotencyProblem,
  IdempotencyProblemType,
  IdempotencyRequestInProgressException,
  IdempotencyRequestNotCanonicalException,
  UnstorableResponseException,
  type ProblemDetails,
} from './idempotency.exceptions.js';
