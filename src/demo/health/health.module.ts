import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { HealthController } from './health.controller.js';
import { OutboxLagHealthIndicator } from './outbox-lag.health.js';

/** `GET /health` through @nestjs/terminus: the database and the outbox relay's lag. Needs IdempotencyOutboxModule (global). */
@Module({
  imports: [TerminusModule.forRoot()],
  controllers: [HealthController],
  providers: [OutboxLagHealthIndicator],
})
export class HealthModule {}
