import type { DataSourceOptions } from 'typeorm';
import { IdempotencyRecord, idempotencyMigrations } from '../../idempotency/index.js';
import { demoMigrations } from '../migrations/index.js';
import { Order } from '../orders/order.entity.js';
import { Shipment } from '../fulfilment/shipment.entity.js';
import { Payment } from '../payments/payment.entity.js';

/** The demo's PostgreSQL connection: migrations run at startup, never `synchronize`. */
export function dataSourceOptions(url: string): DataSourceOptions {
  return {
    type: 'postgres',
    url,
    entities: [Order, Payment, Shipment, IdempotencyRecord],
    migrations: [...idempotencyMigrations, ...demoMigrations],
    migrationsRun: true,
    synchronize: false,
    // Pipelining lets the idempotency layer send BEGIN with its claim, and its outcome with COMMIT.
    extra: { max: Number(process.env.DB_POOL_SIZE ?? 20), pipeline: true },
  };
}
