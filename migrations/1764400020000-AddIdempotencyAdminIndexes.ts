import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The two indexes the admin's lists walk, so that none of them scans a table
 * (`IdempotencyAdmin`, `src/idempotency/admin/admin.statements.ts`):
 *
 * - `idempotency_records_created_at_idx`: records newest first, by time
 *   range, across tenants. `created_at` is set when a key is claimed and no
 *   later write of a run changes it, so recording an outcome stays a HOT
 *   update; a claim adds one entry, always at the index's right edge.
 *   `status` is left out on purpose: an index (or a partial index's
 *   predicate) naming it would make every completion a non-HOT update.
 * - `idempotency_outbox_dead_idx`: dead letters in `seq` order. The relay
 *   never writes a row matching it, apart from the rare event it gives up on.
 *
 * `IF NOT EXISTS`, so that on a large table the indexes can be built
 * beforehand without blocking writes (`CREATE INDEX CONCURRENTLY ...` with
 * these definitions), leaving this migration nothing to do.
 */
export class AddIdempotencyAdminIndexes1764400020000 implements MigrationInterface {
  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE INDEX IF NOT EXISTS idempotency_records_created_at_idx ON idempotency_records (created_at)`);
    await runner.query(`CREATE INDEX IF NOT EXISTS idempotency_outbox_dead_idx ON idempotency_outbox (seq) WHERE status = 'dead'`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP INDEX IF EXISTS idempotency_outbox_dead_idx`);
    await runner.query(`DROP INDEX IF EXISTS idempotency_records_created_at_idx`);
  }
}
