import { Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import pg from 'pg';
import { DataSource } from 'typeorm';

/** Each write holds a connection for one INSERT and waits on nothing else: two keep up. */
const POOL_SIZE = 2;

/**
 * The audit of the order-creation handler: a row in `order_executions` each
 * time it runs, committed before its first write and kept whether its
 * request then commits or rolls back (the chaos run counts executions per
 * operation from it).
 *
 * It writes through a pool of its own. `IdempotencyTransactionHost.outside()` would
 * commit it on its own too, on the app's pool; but the request waits for
 * the write while it holds one of that pool's connections, and once every
 * connection is held by such a request, each waits for another for good.
 */
@Injectable()
export class OrderExecutionLog implements OnApplicationShutdown {
  private readonly logger = new Logger('OrderExecutionLog');
  private readonly pool: pg.Pool;

  constructor(dataSource: DataSource) {
    this.pool = new pg.Pool({ connectionString: (dataSource.options as { url?: string }).url, max: POOL_SIZE });
    // An idle connection lost (a terminated backend, a server restart) must not crash the process; the next write opens another.
    this.pool.on('error', (error) => this.logger.warn(`connection lost: ${error.message}`));
  }

  /** Records that the handler runs for `tenant`'s `sku`, in this process (its pid). */
  async record(tenant: string, sku: string): Promise<void> {
    await this.pool.query(`INSERT INTO order_executions (tenant, sku, instance) VALUES ($1, $2, $3)`, [tenant, sku, String(process.pid)]);
  }

  onApplicationShutdown(): Promise<void> {
    return this.pool.end();
  }
}
