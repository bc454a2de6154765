import { Logger } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import { pgPoolOf } from '../driver/pg-pool.js';
import { OUTBOX_CHANNEL } from './outbox.store.js';

/** The part of node-postgres's pool client the listener uses. */
interface ListeningClient {
  query(text: string): Promise<unknown>;
  on(event: 'notification' | 'error', listener: (...args: unknown[]) => void): unknown;
  release(destroy?: boolean): void;
}

/**
 * Wakes the relay when events commit: a pool connection of the DataSource
 * held for `LISTEN`, the one place the outbox reaches under TypeORM (its
 * PostgreSQL driver keeps the node-postgres pool as `driver.master`). A lost
 * connection is replaced on the next wait; meanwhile the relay polls.
 */
export class OutboxWakeup {
  private readonly logger = new Logger('OutboxRelay');
  private client?: ListeningClient;
  private connecting?: Promise<void>;
  private woken = false;
  private waiter?: () => void;
  private closed = false;

  constructor(
    private readonly dataSource: DataSource,
    private readonly listen: boolean,
  ) {}

  /** Resolves on a notification that arrived since the last wait, after `ms`, or at close. */
  wait(ms: number): Promise<void> {
    if (this.listen && !this.client && !this.connecting && !this.closed) this.connecting = this.connect().finally(() => (this.connecting = undefined));
    if (this.woken || this.closed) {
      this.woken = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      const self = this;
      function done() {
        clearTimeout(timer);
        self.waiter = undefined;
        self.woken = false;
        resolve();
      }
      this.waiter = done;
    });
  }

  /** Ends the current wait at once. */
  wake(): void {
    this.woken = true;
    this.waiter?.();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.wake();
    await this.connecting;
    const client = this.client;
    this.client = undefined;
    if (client) {
      await client.query(`UNLISTEN ${OUTBOX_CHANNEL}`).catch(() => undefined);
      client.release();
    }
  }

  private async connect(): Promise<void> {
    let client: ListeningClient | undefined;
    try {
      const pool = pgPoolOf<ListeningClient>(this.dataSource);
      if (typeof pool?.connect !== 'function') {
        throw new Error('it needs the node-postgres pool of a TypeORM "postgres" DataSource (driver.master); set notify: false to poll only');
      }
      client = await pool.connect();
      client.on('notification', () => this.wake());
      client.on('error', () => this.lose(client!));
      await client.query(`LISTEN ${OUTBOX_CHANNEL}`);
      if (this.closed) throw new Error('closed');
      this.client = client;
      this.wake(); // events may have committed while nobody listened
    } catch (error) {
      client?.release(true);
      if (!this.closed) this.logger.warn(`cannot listen for new events, polling until it can: ${(error as Error).message}`);
    }
  }

  private lose(client: ListeningClient): void {
    if (this.client !== client) return;
    this.client = undefined;
    client.release(true);
  }
}
