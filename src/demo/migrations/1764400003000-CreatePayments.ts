import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The demo's payments. As with orders, nothing here deduplicates: a payment
 * recorded twice would be two payments, and a charge made twice two charges.
 */
export class CreatePayments1764400003000 implements MigrationInterface {
  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE payments (
        id                 uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
        tenant             text        NOT NULL,
        order_id           uuid        NOT NULL REFERENCES orders (id),
        amount_cents       integer     NOT NULL CHECK (amount_cents > 0),
        currency           text        NOT NULL,
        status             text        NOT NULL CHECK (status IN ('pending', 'captured', 'declined')),
        provider_charge_id text,
        created_at         timestamptz NOT NULL DEFAULT now(),
        captured_at        timestamptz
      )`);
    await runner.query(`CREATE INDEX payments_order_idx ON payments (order_id, created_at)`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE payments`);
  }
}
