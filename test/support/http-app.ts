import type { INestApplication, LoggerService, ModuleMetadata } from '@nestjs/common';
import { Test, type TestingModuleBuilder } from '@nestjs/testing';
import { configureHttp, createHttpAdapter, type HttpAdapterName } from '../../src/demo/http/http-setup.js';

/** The HTTP adapters every e2e suite runs on. */
export const HTTP_ADAPTERS: readonly HttpAdapterName[] = ['express', 'fastify'];

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
  /** The app's logger, e.g. one that keeps what it is given. Default none. */
  logger?: LoggerService;
}

export async function startApp(metadata: ModuleMetadata, options: StartOptions = {}): Promise<RunningApp> {
  const builder = Test.createTestingModule(metadata);
  const moduleRef = await (options.adjust ? options.adjust(builder) : builder).compile();
  const adapter = options.adapter ?? 'express';
  const app = moduleRef.createNestApplication(createHttpAdapter(adapter), { logger: options.logger ?? false });
  configureHttp(app, adapter);
  options.configure?.(app);
  await app.listen(0, '127.0.0.1');
  return { app, url: await app.getUrl(), close: () => app.close() };
}
