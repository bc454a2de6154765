export { Idempotent } from './idempotent.decorator.js';
export { IdempotencyModule } from './idempotency.module.js';
export { IDEMPOTENCY_MODULE_OPTIONS } from './idempotency.module-definition.js';
export type { IdempotencyModuleOptions, IdempotentOptions } from './idempotency.options.js';
export type { FingerprintFields } from './request-fingerprint.js';
export { TransactionHost } from './transaction-host.js';
export { IdempotencyRecord, type IdempotencyRecordStatus } from './idempotency-record.entity.js';
export { REPLAYED_HEADER } from './recorded-outcome.js';
export {
  IdempotencyConfigurationError,
  IdempotencyKeyMalformedException,
  IdempotencyKeyMissingException,
  IdempotencyKeyReusedException,
  IdempotencyProblem,
  IdempotencyProblemType,
  IdempotencyRequestInProgressException,
  UnstorableResponseException,
  type ProblemDetails,
} from './idempotency.exceptions.js';
