import { Module } from '@nestjs/common';
import { OrderExecutionLog } from './order-execution-log.js';
import { OrdersController } from './orders.controller.js';
import { OrdersService } from './orders.service.js';

@Module({
  controllers: [OrdersController],
  providers: [OrdersService, OrderExecutionLog],
  exports: [OrdersService, OrderExecutionLog],
})
export class OrdersModule {}
