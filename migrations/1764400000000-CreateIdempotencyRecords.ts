import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The table behind IdempotencyModule. The primary key is what makes a key
 * unique, and what concurrent claims of one key wait on. `expires_at` is
 * indexed for the reaper's batched deletes.
 */
export class CreateIdempotencyRecords1764400000000 implements MigrationInterface {
  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE idempotency_records (
        scope            text        NOT NULL,
        operation        text        NOT NULL,
        key              text        NOT NULL,
        fingerprint      text        NOT NULL,
        status           text        NOT NULL CHECK (status IN ('in_progress', 'completed')),
        response_status  smallint,
        response_headers jsonb,
        response_body    text,
        created_at       timestamptz NOT NULL DEFAULT now(),
        completed_at     timestamptz,
        expires_at       timestamptz NOT NULL,
        CONSTRAINT idempotency_records_pkey PRIMARY KEY (scope, operation, key),
        CONSTRAINT idempotency_records_outcome_chk CHECK (status <> 'completed' OR response_status IS NOT NULL)
      )`);
    await runner.query(`CREATE INDEX idempotency_records_expires_at_idx ON idempotency_records (expires_at)`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE idempotency_records`);
  }
}
