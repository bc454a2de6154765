import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Phased operations (external side effects) commit their claim first and hold
 * it with a lease: `owner_token` fences a stale owner off, `recovery_point`
 * and `phase_results` let a new owner resume, `resume` names the operation and
 * its input so the reaper can finish it without a client.
 */
export class AddLeasesAndRecoveryPoints1764400002000 implements MigrationInterface {
  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      ALTER TABLE idempotency_records
        ADD COLUMN owner_token      uuid,
        ADD COLUMN lease_expires_at timestamptz,
        ADD COLUMN recovery_point   text,
        ADD COLUMN phase_results    jsonb   NOT NULL DEFAULT '{}',
        ADD COLUMN resume           jsonb,
        ADD COLUMN attempts         integer NOT NULL DEFAULT 1,
        ADD COLUMN failure_reason   text,
        DROP CONSTRAINT idempotency_records_status_check,
        ADD CONSTRAINT idempotency_records_status_check CHECK (status IN ('in_progress', 'completed', 'failed')),
        DROP CONSTRAINT idempotency_records_outcome_chk,
        ADD CONSTRAINT idempotency_records_outcome_chk CHECK (status = 'in_progress' OR response_status IS NOT NULL)`);
    await runner.query(`CREATE INDEX idempotency_records_lease_idx ON idempotency_records (lease_expires_at) WHERE status = 'in_progress'`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP INDEX idempotency_records_lease_idx`);
    await runner.query(`
      ALTER TABLE idempotency_records
        DROP CONSTRAINT idempotency_records_outcome_chk,
        ADD CONSTRAINT idempotency_records_outcome_chk CHECK (status <> 'completed' OR response_status IS NOT NULL),
        DROP CONSTRAINT idempotency_records_status_check,
        ADD CONSTRAINT idempotency_records_status_check CHECK (status IN ('in_progress', 'completed')),
        DROP COLUMN owner_token, DROP COLUMN lease_expires_at, DROP COLUMN recovery_point, DROP COLUMN phase_results,
        DROP COLUMN resume, DROP COLUMN attempts, DROP COLUMN failure_reason`);
  }
}
