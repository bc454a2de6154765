import { type ExecutionContext, UnauthorizedException } from '@nestjs/common';
import { Registry } from 'prom-client';
import { type IdempotencyModuleOptions } from '../../src/idempotency/index.js';
import { IdempotencyOutboxModule, type OutboxPublisher } from '../../src/idempotency/outbox/index.js';
import { IdempotencyAdminModule, tenantScope } from '../../src/idempotency/admin/index.js';
import { IdempotencyMetricsModule } from '../../src/idempotency/metrics/index.js';
import { ledgerAppModules } from './ledger-app.js';
import { EventfulModule } from './outbox-app.js';

/** Where the test app serves the admin. */
export const ADMIN = '/ops/idempotency';

/**
 * The test's operators, named by an `X-Operator` header: one sees every
 * scope, one acme's only; `reader` sees every scope too, but the admin's
 * `actor` names nobody for it.
 */
export const OPERATORS: Record<string, 'all' | string[]> = { root: 'all', 'acme-support': [tenantScope('acme')], reader: 'all' };

type OperatorRequest = { headers: Record<string, string | undefined> };

/** Lets in a known `X-Operator`; anyone else gets 401. */
function operatorGuard(context: ExecutionContext): boolean {
  const operator = context.switchToHttp().getRequest<OperatorRequest>().headers['x-operator'];
  if (!operator || !(operator in OPERATORS)) throw new UnauthorizedException('Name a known operator in X-Operator');
  return true;
}

/**
 * The ledger app (plain and phased routes), the outbox with a publisher the
 * test steers and a route that writes events, metrics, and the admin at
 * `ADMIN` behind `X-Operator`.
 */
export function adminAppModules(databaseUrl: string, publisher: OutboxPublisher, registry: Registry, options: Partial<IdempotencyModuleOptions> = {}) {
  return [
    ...ledgerAppModules(databaseUrl, { lease: 60_000, maxAttempts: 3, reaper: false, ...options }),
    IdempotencyOutboxModule.forRoot({ publisher, relay: { maxAttempts: 2, backoff: { baseMs: 5, maxMs: 10 }, pollIntervalMs: 50 } }),
    EventfulModule,
    IdempotencyMetricsModule.forRoot({ registry }),
    IdempotencyAdminModule.forRoot({
      path: ADMIN,
      guard: operatorGuard,
      scopes: (request: OperatorRequest) => OPERATORS[request.headers['x-operator']!],
      actor: (request: OperatorRequest) => (request.headers['x-operator'] === 'reader' ? undefined : request.headers['x-operator']),
    }),
  ];
}
