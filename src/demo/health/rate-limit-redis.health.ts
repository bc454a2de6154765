import { Injectable, Optional } from '@nestjs/common';
import { HealthIndicatorService } from '@nestjs/terminus';
import { InjectThrottlerStorage, type ThrottlerStorage } from '@nestjs/throttler';
import { SharedRateLimitStorage } from '../http/shared-rate-limit.storage.js';

/**
 * The tenant rate limit's Redis as a Terminus indicator, where the demo uses
 * one: `up` while it answers a PING, `degraded` with why not while it is out.
 * Never `down`: the rate limit then fails open to each instance's own counts,
 * so the instance still serves correctly, and all instances share the one
 * Redis: failing readiness would take every instance out of rotation at once,
 * an outage of the API for the outage of a counter.
 */
@Injectable()
export class RateLimitRedisHealthIndicator {
  private readonly storage?: SharedRateLimitStorage;

  constructor(
    private readonly health: HealthIndicatorService,
    // Absent where the rate limit is off; the in-memory storage where it has no Redis.
    @Optional() @InjectThrottlerStorage() storage?: ThrottlerStorage,
  ) {
    this.storage = storage instanceof SharedRateLimitStorage ? storage : undefined;
  }

  /** Whether this instance counts the rate limit in Redis. */
  get used(): boolean {
    return this.storage !== undefined;
  }

  async check<const Key extends string>(key: Key) {
    const indicator = this.health.check(key);
    try {
      await this.storage!.ping();
      return indicator.up({ rateLimit: 'shared' });
    } catch (error) {
      return indicator.degraded({ rateLimit: 'per instance', message: (error as Error).message });
    }
  }
}
