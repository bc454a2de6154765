import { Test, type TestingModule } from '@nestjs/testing';
import { IdempotencyAdminModule, type IdempotencyAdminOptions } from '../../src/idempotency/admin/index.js';
import { ledgerAppModules } from './ledger-app.js';

/**
 * Compiles the ledger app with the admin module at `/admin` on `options`, for
 * a test of what its boot refuses. Without migrations: boots refused one
 * after another on one database would leave theirs running at once.
 */
export function compileAdmin(databaseUrl: string, options: Partial<IdempotencyAdminOptions>): Promise<TestingModule> {
  const imports = [...ledgerAppModules(databaseUrl, { reaper: false }, { migrationsRun: false }), IdempotencyAdminModule.forRoot({ path: 'admin', ...(options as IdempotencyAdminOptions) })];
  return Test.createTestingModule({ imports }).compile();
}
