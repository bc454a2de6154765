import type { DataSourceOptions } from 'typeorm';
import { IdempotencyRecord, idempotencyMigrations } from '../../idempotency/index.js';
import { demoMigrations } from '../migrations/index.js';
import { Order } from '../orders/order.entity.js';
import { Shipment } from '../fulfilment/shipment.entity.js';
import { Payment } from '../payments/payment.entity.js';

/**
 * A connection the server has not answered by then fails, and its request
 * answers 503 with Retry-After: a dead server is noticed in seconds, not at
 * the kernel's TCP timeouts (minutes). pg-pool applies it to a wait for a
 * free connection too, hence well above a busy pool's waits.
 */
const CONNECT_TIMEOUT_MS = 10_000;
/**
 * TCP keepalive probes from 10 s of silence on, then (Node's setting) one a
 * second, ten at most: an idle pooled connection to a host that vanished
 * is found dead in about 20 s, before a request picks it, not after the
 * kernel's two hours.
 */
const KEEPALIVE_AFTER_MS = 10_000;

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
    extra: {
      max: Number(process.env.DB_POOL_SIZE ?? 20),
      pipeline: true,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      keepAlive: true,
      keepAliveInitialDelayMillis: KEEPALIVE_AFTER_MS,
    },
  };
}
