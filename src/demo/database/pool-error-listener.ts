import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import type { Pool, PoolClient } from 'pg';
import { DataSource } from 'typeorm';

/**
 * Keeps a lost PostgreSQL connection from crashing the process. pg-pool drops
 * its own error listener from a client it hands out, and TypeORM attaches one
 * only a tick later: an error arriving in between (a terminated backend, a
 * server restart) is an unhandled 'error' event, which ends the process. A
 * permanent listener on every client closes that gap; the failed query still
 * rejects, and the pool discards the client.
 */
@Injectable()
export class PoolErrorListener implements OnModuleInit {
  private readonly logger = new Logger('Database');

  constructor(private readonly dataSource: DataSource) {}

  onModuleInit(): void {
    const pool = (this.dataSource.driver as unknown as { master?: Pool & { _clients?: PoolClient[] } }).master;
    if (!pool) return;
    const listen = (client: PoolClient) => client.on('error', (error) => this.logger.warn(`connection lost: ${error.message}`));
    pool.on('connect', listen);
    for (const client of pool._clients ?? []) listen(client); // connected while TypeORM started
  }
}
