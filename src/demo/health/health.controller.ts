import { Controller, Get, ServiceUnavailableException } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { Public } from '../auth/api-key.guard.js';

@Controller('health')
export class HealthController {
  constructor(private readonly dataSource: DataSource) {}

  /** 200 while the database answers. */
  @Public()
  @Get()
  async check(): Promise<{ status: 'ok' }> {
    await this.dataSource.query('SELECT 1').catch(() => {
      throw new ServiceUnavailableException('database unreachable');
    });
    return { status: 'ok' };
  }
}
