import { Controller, Get, UseFilters } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TypeOrmHealthIndicator } from '@nestjs/terminus';
import { DataSource } from 'typeorm';
import { Public } from '../auth/api-key.guard.js';
import { HealthCheckFailedFilter } from './health-check-failed.filter.js';
import { OutboxLagHealthIndicator } from './outbox-lag.health.js';
import { RateLimitRedisHealthIndicator } from './rate-limit-redis.health.js';

/** How long the database may take to answer before it counts as down. */
const DATABASE_PING_TIMEOUT_MS = 1000;

@Controller('health')
@UseFilters(HealthCheckFailedFilter)
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly database: TypeOrmHealthIndicator,
    private readonly outbox: OutboxLagHealthIndicator,
    private readonly rateLimitRedis: RateLimitRedisHealthIndicator,
    private readonly dataSource: DataSource,
  ) {}

  /**
   * Terminus's report: 200 while the database answers (`status` `ok`, or
   * `degraded` when the relay lags or the rate limit's Redis is out), 503
   * when it does not.
   */
  @Public()
  @Get()
  @HealthCheck()
  check() {
    return this.health.check([
      () => this.database.pingCheck('database', { connection: this.dataSource }).withTimeout(DATABASE_PING_TIMEOUT_MS),
      () => this.outbox.check('outbox'),
      ...(this.rateLimitRedis.used ? [() => this.rateLimitRedis.check('redis')] : []),
    ]);
  }
}
