import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The fulfilment consumer's shipments, and the end of the demo's own outbox
 * table: orders and payments now write to the library's `idempotency_outbox`.
 * As elsewhere in the demo, nothing here deduplicates: a second shipment of
 * an order would be a second row, so only the consumer's idempotency record
 * stands between a redelivered `order.created` and a duplicate shipment. The
 * foreign key refuses a shipment without its order.
 */
export class CreateShipments1764400005000 implements MigrationInterface {
  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE shipments (
        id         uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
        order_id   uuid        NOT NULL REFERENCES orders (id),
        tenant     text        NOT NULL,
        created_at timestamptz NOT NULL DEFAULT clock_timestamp()
      )`);
    await runner.query(`CREATE INDEX shipments_order_idx ON shipments (order_id)`);
    await runner.query(`DROP TABLE outbox_events`);
  }

  async down(runner: QueryRunner): Promise<void> {
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
    await runner.query(`DROP TABLE shipments`);
  }
}
