import type { INestApplication, ModuleMetadata } from '@nestjs/common';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test, type TestingModuleBuilder } from '@nestjs/testing';

/** The HTTP adapters every e2e suite runs on. */
export const HTTP_ADAPTERS = ['express', 'fastify'] as const;
export type HttpAdapterName = (typeof HTTP_ADAPTERS)[number];

/** A Nest app listening on a loopback port, so that concurrent requests are real connections. */
export interface RunningApp {
  app: INestApplication;
  url: string;
  close(): Promise<void>;
}

export interface StartOptions {
  /** Default express. */
  adapter?: HttpAdapterName;
  /** Runs on the app before it listens, e.g. to serve OpenAPI. */
  configure?: (app: INestApplication) => void;
  /** Adjusts the testing module, e.g. to override a provider. */
  adjust?: (builder: TestingModuleBuilder) => TestingModuleBuilder;
}

export async function startApp(metadata: ModuleMetadata, options: StartOptions = {}): Promise<RunningApp> {
  const builder = Test.createTestingModule(metadata);
  const moduleRef = await (options.adjust ? options.adjust(builder) : builder).compile();
  const app =
    options.adapter === 'fastify'
      ? moduleRef.createNestApplication(new FastifyAdapter(), { logger: false })
      : moduleRef.createNestApplication({ logger: false });
  options.configure?.(app);
  await app.listen(0, '127.0.0.1');
  return { app, url: await app.getUrl(), close: () => app.close() };
}
