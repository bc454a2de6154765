/**
 * The core: `IdempotencyModule`, `@Idempotent()`, the transaction host, the
 * migrations, and the options, events and errors they use. The outbox, the
 * admin, message handlers, GraphQL mutations and phased operations have
 * entry points of their own (`nest-idempotency/outbox`, `/admin`,
 * `/messaging`, `/graphql`, `/phases`).
 *
 * @module nest-idempotency
 */
export { Idempotent, SkipIdempotency } from './http/idempotent.decorator.js';
export { IdempotencyModule } from './module/idempotency.module.js';
export { IDEMPOTENCY_MODULE_OPTIONS } from './module/idempotency.module-definition.js';
export { InjectIdempotencyOptions } from './options/idempotency.tokens.js';
export type {
  EncryptionOptions,
  IdempotentMessageOptions,
  IdempotencyModuleOptions,
  IdempotentOptions,
  ResolvedModuleOptions as ResolvedIdempotencyOptions,
  StoreErrorIf,
} from './options/idempotency.options.js';
export type { EncryptionKey } from './records/encryption-keys.js';
export type { FingerprintFields } from './fingerprint/request-fingerprint.js';
export { IdempotencyTransactionHost } from './transactions/transaction-host.js';
export { IdempotencyRecord, type IdempotencyRecordStatus } from './records/idempotency-record.entity.js';
export { idempotencyMigrations } from '../../migrations/index.js';
export { REPLAYED_HEADER } from './outcome/recorded-outcome.js';
export { IdempotencyReaper, type ReapResult, type RetentionSweep } from './reaper/idempotency.reaper.js';
export { IDEMPOTENCY_REAPER_INTERVAL } from './reaper/reaper-schedule.js';
export {
  IDEMPOTENCY_CHANNELS,
  IdempotencyEvents,
  type IdempotencyEvent,
  type IdempotencyEventListener,
  type AttemptEvent,
  type AttemptOutcome,
  type CommitFailedEvent,
  type ReapedEvent,
  type LeaseExpiredEvent,
  type OutboxRelayedEvent,
  type RelayBatchResult,
  type OutboxDeadLetterEvent,
  type OutboxUnavailableEvent,
  type OutboxReapedEvent,
  type AdminActionEvent,
  type AttemptTimeline,
  type StepTiming,
} from './events/idempotency-events.js';
export type { ReaperOptions } from './options/idempotency.options.js';
export {
  IdempotencyBodyNotFingerprintedException,
  IdempotencyBodyTooLargeException,
  IdempotencyConfigurationError,
  IdempotencyDatabaseUnavailableException,
  IdempotencyKeyMalformedException,
  IdempotencyKeyMissingException,
  IdempotencyKeyReusedException,
  IdempotencyOperationUnfinishedException,
  IdempotencyPrivilegeError,
  IdempotencyProblem,
  IdempotencyProblemType,
  IdempotencyRecordUndecryptableException,
  IdempotencyRequestInProgressException,
  IdempotencyRequestNotCanonicalException,
  IdempotencyTenantUnresolvedException,
  IdempotentMessageError,
  LockHeldByRequestError,
  PoolConnectionRefusedError,
  RequestTransactionConflictError,
  SharedRollbackError,
  StatementRefusedError,
  TransactionClosedError,
  UnitFailedWithoutSavepointError,
  UnstorableResponseException,
  type ProblemDetails,
  type RecordUndecryptableReason,
} from './errors/idempotency.exceptions.js';
