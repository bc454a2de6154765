import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module.js';
import { sharedTempDir, startEmbeddedPostgres, type EmbeddedDatabase } from './database/embedded-postgres.js';

const logger = new Logger('Demo');

/**
 * Serves the demo on PORT (default 3000), against DATABASE_URL or, without
 * it, an embedded PostgreSQL that keeps its data in EMBEDDED_PG_DIR.
 */
async function bootstrap(): Promise<void> {
  let embedded: EmbeddedDatabase | undefined;
  let databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) {
    const dataDir = process.env.EMBEDDED_PG_DIR ?? sharedTempDir('demo-postgres');
    logger.log(`Starting embedded PostgreSQL in ${dataDir}`);
    embedded = await startEmbeddedPostgres({ dataDir, persistent: true, port: Number(process.env.EMBEDDED_PG_PORT ?? 0) });
    databaseUrl = embedded.url;
  }
  const app = await NestFactory.create(AppModule.forRoot({ databaseUrl }));
  const port = Number(process.env.PORT ?? 3000);
  await app.listen(port, process.env.HOST ?? '127.0.0.1');
  logger.log(`Orders demo listening on http://127.0.0.1:${port}`);

  const shutdown = async (signal: string) => {
    logger.log(`${signal}: closing the app${embedded ? ' and the embedded database' : ''}`);
    await app.close();
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
