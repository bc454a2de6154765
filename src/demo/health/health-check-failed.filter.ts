import { type ArgumentsHost, Catch, type ExceptionFilter, ServiceUnavailableException } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';

/**
 * Sends a failed health check as Terminus reports it (which indicator is
 * down, and why) rather than as the demo's generic 503 problem, which hides
 * a 5xx's details from clients: a load balancer or an operator reads this.
 */
@Catch(ServiceUnavailableException)
export class HealthCheckFailedFilter implements ExceptionFilter {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  catch(exception: ServiceUnavailableException, host: ArgumentsHost): void {
    const adapter = this.adapterHost.httpAdapter;
    const response = host.switchToHttp().getResponse();
    adapter.setHeader(response, 'Cache-Control', 'no-store');
    adapter.reply(response, exception.getResponse(), exception.getStatus());
  }
}
