import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { HealthController } from './health.controller.js';
import { OutboxLagHealthIndicator } from './outbox-lag.health.js';
import { RateLimitRedisHealthIndicator } from './rate-limit-redis.health.js';

/** `GET /health` through @nestjs/terminus: the database, the outbox relay's lag and the rate limit's Redis. Needs IdempotencyOutboxModule (global). */
@Module({
  imports: [TerminusModule.forRoot()],
  controllers: [HealthController],
  providers: [OutboxLagHealthIndicator, RateLimitRedisHealthIndicator],
})
export class HealthModule {}
