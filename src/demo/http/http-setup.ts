import type { INestApplication } from '@nestjs/common';
import { ExpressAdapter, type NestExpressApplication } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { answerMalformedRequest } from './malformed-request.handler.js';

/** The HTTP adapters the demo runs on. */
export type HttpAdapterName = 'express' | 'fastify';

/** Largest request body the demo accepts; larger ones get 413. */
export const BODY_LIMIT_BYTES = 16 * 1024;

/** The adapter, with the demo's body limit and malformed-request answer built in where the adapter takes them. */
export function createHttpAdapter(name: HttpAdapterName): ExpressAdapter | FastifyAdapter {
  return name === 'fastify' ? new FastifyAdapter({ bodyLimit: BODY_LIMIT_BYTES, clientErrorHandler: answerMalformedRequest }) : new ExpressAdapter();
}

/** What Express takes on the application rather than the adapter; call before `listen`. */
export function configureHttp(app: INestApplication, name: HttpAdapterName): void {
  if (name === 'fastify') return;
  (app as NestExpressApplication).useBodyParser('json', { limit: BODY_LIMIT_BYTES });
  app.getHttpServer().on('clientError', answerMalformedRequest);
}
