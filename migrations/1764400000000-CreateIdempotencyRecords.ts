import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The table behind IdempotencyModule.
 *
 * - The primary key is what makes a key unique, and what concurrent claims of
 *   one key wait on.
 * - `expires_at` is indexed for the reaper's batched deletes.
 * - Phased operations (external side effects) commit their claim first and
 *   hold it with a lease: `owner_token` fences a stale owner off,
 *   `recovery_point` and `phase_results` let a new owner resume, and `resume`
 *   names the operation and its input so the reaper can finish it without a
 *   client. The lease index names `lease_expires_at` only, never `status`, so
 *   that the UPDATE recording an outcome stays a HOT update (no new index
 *   entries); pages keep 10% free for the updated row version.
 */
export class CreateIdempotencyRecords1764400000000 implements MigrationInterface {
  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE idempotency_records (
        scope            text        NOT NULL,
        operation        text        NOT NULL,
        key              text        NOT NULL,
        fingerprint      text        NOT NULL,
        status           text        NOT NULL,
        response_status  smallint,
        response_headers jsonb,
        response_body    text,
        created_at       timestamptz NOT NULL DEFAULT now(),
        completed_at     timestamptz,
        expires_at       timestamptz NOT NULL,
        owner_token      uuid,
        lease_expires_at timestamptz,
        recovery_point   text,
        phase_results    jsonb       NOT NULL DEFAULT '{}',
        resume           jsonb,
        attempts         integer     NOT NULL DEFAULT 1,
        failure_reason   text,
        CONSTRAINT idempotency_records_pkey PRIMARY KEY (scope, operation, key),
        CONSTRAINT idempotency_records_status_check CHECK (status IN ('in_progress', 'completed', 'failed')),
        CONSTRAINT idempotency_records_outcome_chk CHECK (status = 'in_progress' OR response_status IS NOT NULL)
      ) WITH (fillfactor = 90)`);
    await runner.query(`CREATE INDEX idempotency_records_expires_at_idx ON idempotency_records (expires_at)`);
    await runner.query(`CREATE INDEX idempotency_records_lease_idx ON idempotency_records (lease_expires_at) WHERE lease_expires_at IS NOT NULL`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE idempotency_records`);
  }
}
