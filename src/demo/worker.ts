import 'reflect-metadata';
import { type INestApplicationContext, Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DELIVERY_OFF_MESSAGE, deliveryFromEnv, fulfilmentTransport } from './messaging/delivery.js';
import { WorkerModule } from './worker.module.js';

const logger = new Logger('Worker');
const env = process.env;

/**
 * `npm run worker`: the outbox relay and the fulfilment consumer in a
 * process of their own, against DATABASE_URL (the API's database) and
 * NATS_URL. OUTBOX_RELAY=off or FULFILMENT_CONSUMER=off run one of the two.
 */
async function bootstrap(): Promise<void> {
  const databaseUrl = env.DATABASE_URL;
  const delivery = deliveryFromEnv();
  if (!databaseUrl || !delivery.natsServers) {
    logger.error(`The worker needs DATABASE_URL (the demo's database) and NATS_URL. ${delivery.natsServers ? '' : DELIVERY_OFF_MESSAGE}`);
    process.exit(2);
  }
  const module = WorkerModule.forRoot({ databaseUrl, delivery });
  let app: INestApplicationContext;
  if (delivery.consumer) {
    const microservice = await NestFactory.createMicroservice(module, { strategy: await fulfilmentTransport(delivery) });
    await microservice.listen();
    app = microservice;
  } else {
    app = await NestFactory.createApplicationContext(module);
    await app.init();
  }
  logger.log(`Worker running: relay ${delivery.relay ? 'on' : 'off'}, fulfilment consumer ${delivery.consumer ? 'on' : 'off'} (NATS ${delivery.natsServers.join(', ')})`);

  const shutdown = async (signal: string) => {
    logger.log(`${signal}: stopping`);
    await app.close();
    process.exit(0);
  };
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);
}

bootstrap().catch((error: unknown) => {
  logger.error(error);
  process.exit(1);
});
