import { Controller, Get, Inject, Res } from '@nestjs/common';
import type { Registry } from 'prom-client';
import { Public } from '../auth/api-key.guard.js';
import { IDEMPOTENCY_METRICS_REGISTRY } from '../../idempotency/metrics/index.js';

/** Express and Fastify responses both set headers this way. */
interface HeaderWriter {
  header(name: string, value: string): unknown;
}

/** The Prometheus scrape endpoint. */
@Controller('metrics')
export class MetricsController {
  constructor(@Inject(IDEMPOTENCY_METRICS_REGISTRY) private readonly registry: Registry) {}

  @Public()
  @Get()
  async scrape(@Res({ passthrough: true }) response: HeaderWriter): Promise<string> {
    response.header('Content-Type', this.registry.contentType);
    return this.registry.metrics();
  }
}
