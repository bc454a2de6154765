import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The demo's orders and their outbox. Nothing here deduplicates orders:
 * equal bodies under different keys are different orders, so only the
 * idempotency layer stands between a retry and a duplicate.
 */
export class CreateOrders1764400001000 implements MigrationInterface {
  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE orders (
        id         uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
        seq        bigint      GENERATED ALWAYS AS IDENTITY UNIQUE,
        tenant     text        NOT NULL,
        sku        text        NOT NULL,
        quantity   integer     NOT NULL CHECK (quantity BETWEEN 1 AND 1000),
        note       text,
        status     text        NOT NULL DEFAULT 'created',
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await runner.query(`CREATE INDEX orders_tenant_seq_idx ON orders (tenant, seq DESC)`);
    await runner.query(`
      CREATE TABLE outbox_events (
        id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        tenant       text        NOT NULL,
        event_type   text        NOT NULL,
        aggregate_id uuid        NOT NULL,
        payload      jsonb       NOT NULL,
        created_at   timestamptz NOT NULL DEFAULT now(),
        published_at timestamptz
      )`);
    await runner.query(`CREATE INDEX outbox_events_unpublished_idx ON outbox_events (id) WHERE published_at IS NULL`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE outbox_events`);
    await runner.query(`DROP TABLE orders`);
  }
}
