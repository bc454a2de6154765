import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module.js';
import { checkoutTempDir, startEmbeddedPostgres, type EmbeddedDatabase } from './database/embedded-postgres.js';
import { configureHttp, createHttpAdapter, type HttpAdapterName } from './http/http-setup.js';
import { DELIVERY_OFF_MESSAGE, deliveryFromEnv, fulfilmentTransport } from './messaging/delivery.js';
import { serveOpenApi } from './openapi.js';
import { startFakePaymentProvider, type FakePaymentProvider } from './payment-provider/fake-payment-provider.js';

const logger = new Logger('Demo');
const env = process.env;
const optionalNumber = (name: string) => (env[name] ? Number(env[name]) : undefined);

/**
 * Serves the demo on PORT (default 3000; 0 picks a free one), against DATABASE_URL or, without
 * it, an embedded PostgreSQL that keeps its data in EMBEDDED_PG_DIR; charges
 * through PAYMENT_PROVIDER_URL or, without it, a fake provider on loopback.
 * HTTP_ADAPTER=fastify serves it on Fastify instead of Express. GraphQL is
 * at /graphql: Apollo on Express, Mercurius on Fastify. With NATS_URL
 * it also runs the outbox relay and the fulfilment consumer (a hybrid app;
 * OUTBOX_RELAY=off or FULFILMENT_CONSUMER=off leave either to `npm run worker`).
 */
async function bootstrap(): Promise<void> {
  let embedded: EmbeddedDatabase | undefined;
  let provider: FakePaymentProvider | undefined;
  let databaseUrl = env.DATABASE_URL;
  if (!databaseUrl) {
    const dataDir = env.EMBEDDED_PG_DIR ?? checkoutTempDir('demo-postgres');
    logger.log(`Starting embedded PostgreSQL in ${dataDir}`);
    embedded = await startEmbeddedPostgres({ dataDir, persistent: true, port: optionalNumber('EMBEDDED_PG_PORT') });
    databaseUrl = embedded.url;
  }
  let paymentProviderUrl = env.PAYMENT_PROVIDER_URL;
  if (!paymentProviderUrl) {
    provider = await startFakePaymentProvider({ port: optionalNumber('FAKE_PROVIDER_PORT') });
    paymentProviderUrl = provider.url;
    logger.log(`Fake payment provider on ${provider.url}`);
  }
  const reaperInterval = optionalNumber('REAPER_INTERVAL_MS');
  const adapter: HttpAdapterName = env.HTTP_ADAPTER === 'fastify' ? 'fastify' : 'express';
  // Loaded only here: the app's own module, and the tests that build it, stay free of GraphQL.
  const { DemoGraphqlModule } = await import('./graphql/graphql.module.js');
  const delivery = deliveryFromEnv();
  const appModule = AppModule.forRoot({
      databaseUrl,
      paymentProviderUrl,
      paymentTimeoutMs: optionalNumber('PAYMENT_PROVIDER_TIMEOUT_MS'),
      idempotency: {
        lease: optionalNumber('IDEMPOTENCY_LEASE_MS'),
        maxBodyBytes: optionalNumber('IDEMPOTENCY_MAX_BODY_BYTES'),
        // Behind a pooler that loses named statements the module finds out by itself; this only saves it the look.
        preparedStatements: env.IDEMPOTENCY_PREPARED_STATEMENTS === undefined ? undefined : env.IDEMPOTENCY_PREPARED_STATEMENTS !== 'false',
        reaper: reaperInterval === 0 ? false : { intervalMs: reaperInterval },
      },
      graphql: await DemoGraphqlModule.forAdapter(adapter),
      delivery,
    });
  const app = await NestFactory.create(appModule, createHttpAdapter(adapter));
  configureHttp(app, adapter);
  serveOpenApi(app);
  if (!delivery.natsServers) logger.log(DELIVERY_OFF_MESSAGE);
  else if (delivery.consumer) {
    // Not inheriting the app's config: its API-key guard and rate limit are for HTTP requests.
    app.connectMicroservice({ strategy: await fulfilmentTransport(delivery) });
    await app.startAllMicroservices();
  }
  if (delivery.natsServers) logger.log(`Event delivery through NATS JetStream at ${delivery.natsServers.join(', ')}: relay ${delivery.relay ? 'on' : 'off'}, fulfilment consumer ${delivery.consumer ? 'on' : 'off'}`);
  const port = Number(env.PORT ?? 3000);
  await app.listen(port, env.HOST ?? '127.0.0.1');
  logger.log(`Orders demo listening on ${await app.getUrl()} (${adapter})`);

  const shutdown = async (signal: string) => {
    logger.log(`${signal}: closing the app${embedded ? ' and the embedded database' : ''}`);
    await app.close();
    await provider?.close();
    await embedded?.stop();
    process.exit(0);
  };
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);
}

bootstrap().catch((error: unknown) => {
  logger.error(error);
  process.exit(1);
});
