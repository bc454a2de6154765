/**
 * The admin (`nest-idempotency/admin`): `IdempotencyAdminModule` (its JSON
 * API and page), and `IdempotencyAdmin` to find, release, fail and requeue
 * records from code. An app that imports only the core entry point loads
 * none of it.
 *
 * @module nest-idempotency/admin
 */
export { IdempotencyAdminModule } from './idempotency-admin.module.js';
export type { AdminModuleExtras } from './admin.module-definition.js';
export type { AdminGuardOption, AdminScopes, IdempotencyAdminOptions } from './admin.options.js';
export { IdempotencyAdmin, type ReleaseOptions } from './idempotency-admin.js';
export { tenantScope } from './admin-access.js';
export { AdminProblemType, AdminRefusedException } from './admin.exceptions.js';
export type {
  AdminActionResult,
  AdminCaller,
  AdminPage,
  OutboxEventView,
  OutboxQuery,
  PageRequest,
  RecordAnswer,
  RecordDetail,
  RecordQuery,
  RecordSummary,
  RunEffects,
  UnfinishedOperation,
  UnfinishedQuery,
  UnfinishedState,
} from './admin.types.js';
