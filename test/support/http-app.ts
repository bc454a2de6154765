import type { INestApplication, ModuleMetadata } from '@nestjs/common';
import { Test, type TestingModuleBuilder } from '@nestjs/testing';

/** A Nest app listening on a loopback port, so that concurrent requests are real connections. */
export interface RunningApp {
  app: INestApplication;
  url: string;
  close(): Promise<void>;
}

export async function startApp(
  metadata: ModuleMetadata,
  /** Runs on the app before it listens, e.g. to serve OpenAPI. */
  configure?: (app: INestApplication) => void,
  /** Adjusts the testing module, e.g. to override a provider. */
  adjust: (builder: TestingModuleBuilder) => TestingModuleBuilder = (builder) => builder,
): Promise<RunningApp> {
  const moduleRef = await adjust(Test.createTestingModule(metadata)).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  configure?.(app);
  await app.listen(0, '127.0.0.1');
  return { app, url: await app.getUrl(), close: () => app.close() };
}
