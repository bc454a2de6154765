import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The outbox: events written in the transaction of the change they announce,
 * delivered afterwards by the relay.
 *
 * - `id` is the event's operation identity, derived from the idempotency
 *   record that caused it; the publisher sends it as the message id and
 *   consumers deduplicate on it.
 * - `seq` orders events. Writers of one `ordering_key` hold a transaction
 *   lock on it from their insert to their commit, so among events of one key
 *   `seq` order is commit order.
 * - Pending events are read through `idempotency_outbox_pending_idx` (oldest
 *   first) and `idempotency_outbox_ordering_idx` (the head of each key);
 *   settled ones (sent or dead) through `idempotency_outbox_settled_idx`, by
 *   the reaper.
 */
export class CreateIdempotencyOutbox1764400010000 implements MigrationInterface {
  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE idempotency_outbox (
        id              uuid        PRIMARY KEY,
        seq             bigint      GENERATED ALWAYS AS IDENTITY,
        type            text        NOT NULL,
        payload         jsonb       NOT NULL,
        headers         jsonb       NOT NULL DEFAULT '{}',
        ordering_key    text,
        source_key_hash text,
        status          text        NOT NULL DEFAULT 'pending',
        attempts        integer     NOT NULL DEFAULT 0,
        next_attempt_at timestamptz NOT NULL DEFAULT now(),
        last_error      text,
        created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
        settled_at      timestamptz,
        CONSTRAINT idempotency_outbox_status_check CHECK (status IN ('pending', 'sent', 'dead')),
        CONSTRAINT idempotency_outbox_settled_check CHECK ((status = 'pending') = (settled_at IS NULL))
      )`);
    await runner.query(`CREATE INDEX idempotency_outbox_pending_idx ON idempotency_outbox (seq) WHERE status = 'pending'`);
    await runner.query(`CREATE INDEX idempotency_outbox_ordering_idx ON idempotency_outbox (ordering_key, seq) WHERE status = 'pending'`);
    await runner.query(`CREATE INDEX idempotency_outbox_settled_idx ON idempotency_outbox (settled_at) WHERE status <> 'pending'`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE idempotency_outbox`);
  }
}
