import { Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { IdempotencyDataSource } from '../transactions/idempotency-data-source.js';
import { ReplayCache } from '../flow/replay-cache.js';
import { pgPoolOf } from '../driver/pg-pool.js';
import { RELEASED_CHANNEL } from './admin.statements.js';

/** The part of a node-postgres client the listener uses. */
interface ListeningClient {
  connect(): Promise<void>;
  query(text: string): Promise<unknown>;
  on(event: 'notification', listener: (message: { payload?: string }) => void): unknown;
  on(event: 'error', listener: () => void): unknown;
  end(): Promise<void>;
}

const RETRY_MS = { first: 500, most: 30_000 };

/**
 * Keeps this instance's replay cache true to released keys. The replay
 * cache holds a record's outcome until it expires, because a record never
 * changes before then; a release (from any instance's admin, or the CLI)
 * deletes one early and announces it at commit on `RELEASED_CHANNEL`. Each
 * announcement drops the key's entry here; while the listening connection
 * is down an announcement may be missed, so every (re)connection drops the
 * whole cache. It listens on a connection of its own, made as the
 * DataSource's pool makes its own (TypeORM's postgres driver keeps the
 * node-postgres pool as `driver.master`, as the outbox relay's wake-up reads
 * it), so that it takes no connection from the pool, and never keeps
 * `dataSource.destroy()` waiting for one.
 */
@Injectable()
export class ReleasedKeysListener implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('IdempotencyAdmin');
  private client?: ListeningClient;
  private retry?: NodeJS.Timeout;
  private retryMs = RETRY_MS.first;
  private closed = false;

  constructor(
    private readonly served: IdempotencyDataSource,
    private readonly moduleRef: ModuleRef,
  ) {}

  /** Listens before the app serves, so that no release after startup goes unheard. */
  async onApplicationBootstrap(): Promise<void> {
    await this.connect();
  }

  async onModuleDestroy(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private get cache(): ReplayCache | undefined {
    try {
      return this.moduleRef.get(ReplayCache, { strict: false });
    } catch {
      return undefined; // IdempotencyModule is not imported: nothing is cached
    }
  }

  private async connect(): Promise<void> {
    const pool = pgPoolOf<ListeningClient>(this.served.dataSource);
    if (typeof pool?.Client !== 'function') {
      this.logger.warn('Cannot hear released keys without the node-postgres pool of a TypeORM "postgres" DataSource: a released key may replay from this instance\'s cache until it lapses (replayCacheSize: 0 avoids it).');
      return;
    }
    const client = new pool.Client(pool.options);
    try {
      client.on('notification', ({ payload }) => this.heard(payload));
      client.on('error', () => this.lost(client));
      await client.connect();
      await client.query(`LISTEN ${RELEASED_CHANNEL}`);
      if (this.closed) return await client.end();
      this.client = client;
      this.retryMs = RETRY_MS.first;
      this.cache?.forget(); // a key may have been released while nobody here listened
    } catch (error) {
      void client.end().catch(() => undefined);
      this.reconnect(`cannot listen for released keys (${(error as Error).message})`);
    }
  }

  private heard(payload: string | undefined): void {
    const id = parseId(payload);
    this.cache?.forget(id);
  }

  private lost(client: ListeningClient): void {
    if (this.client !== client) return;
    this.client = undefined;
    void client.end().catch(() => undefined);
    this.reconnect('lost the connection listening for released keys');
  }

  private reconnect(why: string): void {
    if (this.closed) return;
    this.logger.warn(`${why}; retrying in ${this.retryMs} ms`);
    this.retry = setTimeout(() => void this.connect(), this.retryMs);
    this.retry.unref();
    this.retryMs = Math.min(this.retryMs * 2, RETRY_MS.most);
  }
}

/** The released key, or undefined for "every key" (a payload too long to carry it, or one this version does not read). */
function parseId(payload: string | undefined): { scope: string; operation: string; key: string } | undefined {
  try {
    const parts: unknown = JSON.parse(payload ?? '');
    if (Array.isArray(parts) && parts.length === 3 && parts.every((part) => typeof part === 'string')) return { scope: parts[0], operation: parts[1], key: parts[2] };
  } catch {
    // not an id: drop everything, to be safe
  }
  return undefined;
}
