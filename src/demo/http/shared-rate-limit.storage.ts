import { Logger, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { ThrottlerStorageRedisService } from '@nest-lab/throttler-storage-redis';
import { type ThrottlerStorage, ThrottlerStorageService } from '@nestjs/throttler';
import { Redis } from 'ioredis';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';

/** How long a Redis command may take before the request stops waiting on it (a count takes well under a millisecond). */
const COMMAND_TIMEOUT_MS = 500;
/** How long the counts stay in this instance after Redis failed, before a request tries Redis again. */
const REDIS_SKIPPED_MS = 5_000;
/** How long a connection attempt waits, and so startup, which waits for Redis so that the first requests share their counts. */
const CONNECT_TIMEOUT_MS = 1_000;
/** At most one outage line per this interval: while Redis is out, every reconnection fails. */
const OUTAGE_LOG_INTERVAL_MS = 60_000;

/**
 * The tenant rate limit's counts in Redis, shared by the instances, that
 * fail open to this instance's own counts while Redis is out, as without
 * REDIS_URL. Open rather than 503: the limit only bounds how fast a tenant
 * fills the records, which live in PostgreSQL, so an instance counting alone
 * lets a tenant through up to N times the limit over N instances for the
 * outage, where refusing would turn a cache outage into an outage of the API.
 *
 * The guard runs before any interceptor, so every request counts here, a
 * replay the idempotency module answers from its cache too: none may wait on
 * Redis while it is out. Commands fail at once while it is disconnected (no
 * offline queue, no retries), within `COMMAND_TIMEOUT_MS` while it is
 * connected but silent, and after a failure requests skip it for
 * `REDIS_SKIPPED_MS`.
 */
export class SharedRateLimitStorage implements ThrottlerStorage, OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('TenantRateLimit');
  private readonly redis: Redis;
  private readonly shared: ThrottlerStorageRedisService;
  private readonly local = new ThrottlerStorageService();
  private redisSkippedUntil = 0;
  private outageLoggedAt = -Infinity;
  /** Whether an outage line awaits its recovery line. */
  private outageReported = false;
  private lastError?: Error;

  constructor(url: string) {
    this.redis = new Redis(url, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: COMMAND_TIMEOUT_MS, connectTimeout: CONNECT_TIMEOUT_MS });
    // Without a listener ioredis prints every failed reconnection.
    this.redis.on('error', (error) => this.outage(error));
    this.redis.on('ready', () => this.recovered());
    this.shared = new ThrottlerStorageRedisService(this.redis);
  }

  async onModuleInit(): Promise<void> {
    // A Redis that accepts and never answers would hold connect() for ever; the error listener reports a failure.
    await Promise.race([this.redis.connect().catch(() => undefined), sleep(CONNECT_TIMEOUT_MS, undefined, { ref: false })]);
  }

  onModuleDestroy(): void {
    this.redis.disconnect();
    this.local.onApplicationShutdown();
  }

  async increment(...hit: Parameters<ThrottlerStorage['increment']>): ReturnType<ThrottlerStorage['increment']> {
    if (performance.now() >= this.redisSkippedUntil) {
      try {
        return await this.shared.increment(...hit);
      } catch (error) {
        this.redisSkippedUntil = performance.now() + REDIS_SKIPPED_MS;
        this.outage(error as Error);
      }
    }
    return this.local.increment(...hit);
  }

  /** Resolves when Redis answers a PING now; rejects with why not, for /health. */
  async ping(): Promise<void> {
    try {
      await this.redis.ping();
    } catch (error) {
      // While disconnected the PING's own error only says that no command is queued.
      throw this.redis.status === 'ready' ? error : (this.lastError ?? error);
    }
  }

  private outage(error: Error): void {
    this.lastError = error;
    const now = performance.now();
    if (now - this.outageLoggedAt < OUTAGE_LOG_INTERVAL_MS) return;
    this.outageLoggedAt = now;
    this.outageReported = true;
    this.logger.warn(`Redis failed (${error.message}): each instance counts the tenant rate limit on its own until it answers. Said at most once a minute.`);
  }

  private recovered(): void {
    this.lastError = undefined;
    this.redisSkippedUntil = 0;
    if (!this.outageReported) return;
    this.outageReported = false;
    this.logger.log('Redis answers again: the instances share the tenant rate limit again.');
  }
}
