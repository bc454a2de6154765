import type { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type { ModuleMetadata } from '@nestjs/common';

/** A Nest app listening on a loopback port, so that concurrent requests are real connections. */
export interface RunningApp {
  app: INestApplication;
  url: string;
  close(): Promise<void>;
}

export async function startApp(metadata: ModuleMetadata): Promise<RunningApp> {
  const moduleRef = await Test.createTestingModule(metadata).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  await app.listen(0, '127.0.0.1');
  return { app, url: await app.getUrl(), close: () => app.close() };
}
