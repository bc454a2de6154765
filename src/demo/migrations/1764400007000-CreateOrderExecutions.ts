import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * An audit of the order-creation handler: one row each time it runs,
 * committed on its own before the handler's first write, and kept whether
 * the request then commits or rolls back. The orders table shows what
 * committed; this shows how often the handler ran to get there.
 */
export class CreateOrderExecutions1764400007000 implements MigrationInterface {
  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE order_executions (
        id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        tenant     text        NOT NULL,
        sku        text        NOT NULL,
        instance   text        NOT NULL,
        started_at timestamptz NOT NULL DEFAULT clock_timestamp()
      )`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE order_executions`);
  }
}
